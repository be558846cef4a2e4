"""The rendered FSDP job on the real local SLURM cluster: 2 nodes x 1 gloo rank, the trainer under torchrun.

One uninterrupted run is the reference; a run that loses a rank and one stopped with SIGUSR1 must requeue
themselves, resume from their checkpoints and log the reference's losses step for step.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
from pathlib import Path

import pytest

from cluster.verify.local_slurm import LocalSlurm
from cluster.verify.local_slurm.install import ensure_shellcheck
from launch.follow import follow
from tests.launch.conftest import write_job
from tests.launch.slurm_helpers import (
    assert_same_losses,
    fsdp_argv,
    job_id_of,
    job_log,
    job_story,
    kill_rank,
    losses_by_step,
    resumed_steps,
    submit,
    wait_for_end,
    wait_for_restart,
    wait_for_resume,
    wait_for_step,
)

pytestmark = pytest.mark.slurm

STEPS = 50
CHECKPOINT_EVERY = 10  # write_job's


def _next_checkpoint(step: int) -> int:
    """The first scheduled checkpoint after `step`."""
    return (step // CHECKPOINT_EVERY + 1) * CHECKPOINT_EVERY


@pytest.fixture(scope="module")
def reference(local_slurm_session: LocalSlurm, demo_data: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An uninterrupted run; the tests compare with its losses."""
    local_slurm_session.reset()
    base = tmp_path_factory.mktemp("reference")
    run_dir = base / "run"
    (job_id,) = submit(local_slurm_session, fsdp_argv(write_job(base / "tiny.yaml"), demo_data, run_dir, STEPS))
    job = wait_for_end(local_slurm_session, job_id)
    story = job_story(local_slurm_session, run_dir, job_id)
    assert (job["JobState"], job["ExitCode"], job["Restarts"]) == ("COMPLETED", "0:0", "0"), story
    assert job["NodeList"] == "n[1-2]"
    return run_dir


def _assert_matches_reference(run_dir: Path, reference: Path) -> None:
    assert_same_losses(run_dir, reference, STEPS)


def test_the_rendered_script_trains_on_two_nodes_and_ends_with_a_checkpoint(
    reference: Path, local_slurm_session: LocalSlurm, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert sorted(losses_by_step(reference)) == list(range(1, STEPS + 1))
    assert (reference / "checkpoints" / f"step-{STEPS}").is_dir()
    assert json.loads((reference / "exit_status.json").read_text())["exit_code"] == 0
    log = job_log(reference)
    # The log opens with the job and its environment, then the launch, then the trainer's own lines.
    assert log.startswith("job[") and "---- environment ----\n" in log
    assert re.search(r"^SLURM_JOB_NUM_NODES=2$", log, re.M) and re.search(r"^OMP_NUM_THREADS=1$", log, re.M)
    assert "--rdzv_backend c10d --rdzv_endpoint 127.0.0.1:" in log
    # The store outlives the agents: none of them reads a closed store at the exit barrier (make demo's trace).
    assert "--rdzv_conf is_host=false" in log
    assert "TCPStore" not in log and "exit barrier" not in log, log[-4000:]
    assert "world 2" in log and log.rstrip().endswith("finished")
    # What `make demo` prints at the end of the run.
    monkeypatch.setenv("SLURM_CONF", str(local_slurm_session.conf_path))
    out = io.StringIO()
    assert follow(job_id_of(reference), reference, timeout_s=30, out=out, poll_s=0.1) == 0
    summary = out.getvalue()
    assert f"final loss      {losses_by_step(reference)[STEPS]:.4f} at step {STEPS}" in summary
    assert " tokens/s over 2 ranks" in summary and f"checkpoint      {reference}/checkpoints/step-{STEPS}" in summary
    script = reference.parent / "run.fsdp.sbatch"
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    assert subprocess.run([ensure_shellcheck(), str(script)], capture_output=True, check=False).returncode == 0


def test_stops_and_failures_requeue_or_end_and_the_run_resumes_with_the_reference_losses(
    local_slurm: LocalSlurm, demo_data: str, reference: Path, tmp_path: Path
) -> None:
    config, run_dir = write_job(tmp_path / "tiny.yaml"), tmp_path / "run"
    (job_id,) = submit(local_slurm, fsdp_argv(config, demo_data, run_dir, STEPS))

    # 1. What #SBATCH --signal=B:USR1@120 does 120 s before the time limit: USR1 to the batch shell only.
    wait_for_step(run_dir, 3)
    local_slurm.run(["scancel", "--signal=USR1", "--batch", job_id])
    # 2. In the requeued run, past its first scheduled checkpoint after its resume, one rank dies. Steps are chosen
    # from the run's own resume, not fixed: under load the stop may land several steps after the signal.
    wait_for_restart(local_slurm, run_dir, job_id, 1)
    first_resume = wait_for_resume(run_dir, 1)
    killed_at = wait_for_step(run_dir, _next_checkpoint(first_resume) + 2)
    kill_rank(run_dir, rank=1)
    # 3. In the next run, a request to checkpoint and stop for good, once it has run a few steps of its own (its
    # steps past anything the killed run may have logged).
    wait_for_restart(local_slurm, run_dir, job_id, 2)
    second_resume = wait_for_resume(run_dir, 2)
    stop_after = wait_for_step(run_dir, max(second_resume, killed_at + 1) + 2)
    local_slurm.run(["scancel", "--signal=USR2", "--batch", job_id])
    job = wait_for_end(local_slurm, job_id, run_dir=run_dir)
    log = job_log(run_dir)
    assert (job["JobState"], job["ExitCode"], job["Restarts"]) == ("FAILED", "42:0", "2"), job_story(
        local_slurm, run_dir, job_id
    )
    assert "got SIGUSR1; sending SIGUSR1 to the training step" in log
    assert (
        "stopped before the time limit with a checkpoint (stopped on request (SIGUSR1)); requeueing (restart 1, not a failure)"
        in log
    )
    assert "step failed (step exit status" in log and "requeueing (failure 1 of at most 10)" in log
    assert "stopped on request (SIGUSR2; stopped on request (SIGUSR1)): not requeued" in log
    resumed = resumed_steps(run_dir)
    assert len(resumed) == 2 and resumed[0] >= 3  # the stop's own checkpoint
    assert _next_checkpoint(first_resume) <= resumed[1] <= killed_at

    # 4. The same command again resumes from the USR2 checkpoint and finishes.
    (again,) = submit(local_slurm, fsdp_argv(config, demo_data, run_dir, STEPS))
    job = wait_for_end(local_slurm, again, run_dir=run_dir)
    assert (job["JobState"], job["Restarts"]) == ("COMPLETED", "0"), job_story(local_slurm, run_dir, again)
    assert resumed_steps(run_dir)[-1] >= stop_after
    _assert_matches_reference(run_dir, reference)


def test_an_error_a_retry_cannot_fix_is_not_requeued(local_slurm: LocalSlurm, demo_data: str, tmp_path: Path) -> None:
    # Refusing to save (free space below margin x checkpoint size) ends the trainer with EXIT_CHECKPOINT_FAILED.
    config = write_job(tmp_path / "tiny.yaml", checkpoint={"every": 1, "free_space_margin": 1e12})
    run_dir = tmp_path / "run"
    (job_id,) = submit(local_slurm, fsdp_argv(config, demo_data, run_dir, STEPS))
    job = wait_for_end(local_slurm, job_id)
    log = job_log(run_dir)
    assert (job["JobState"], job["ExitCode"], job["Restarts"]) == ("FAILED", "44:0", "0"), job_story(
        local_slurm, run_dir, job_id
    )
    assert "a retry cannot fix this, not requeued" in log


def test_rank_failures_stop_requeueing_at_the_bound_and_time_limit_stops_do_not_count(
    local_slurm: LocalSlurm, demo_data: str, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    (job_id,) = submit(
        local_slurm, fsdp_argv(write_job(tmp_path / "tiny.yaml"), demo_data, run_dir, STEPS, "--max-requeues", "0")
    )
    # A healthy stop before the time limit requeues even when no failure may be retried.
    wait_for_step(run_dir, 2)
    local_slurm.run(["scancel", "--signal=USR1", "--batch", job_id])
    wait_for_restart(local_slurm, run_dir, job_id, 1)
    # The first failure is then already one too many (killed once the requeued run has trained a step of its own).
    wait_for_step(run_dir, wait_for_resume(run_dir, 1) + 1)
    kill_rank(run_dir, rank=0)
    job = wait_for_end(local_slurm, job_id, run_dir=run_dir)
    log = job_log(run_dir)
    assert (job["JobState"], job["Restarts"]) == ("FAILED", "1"), job_story(local_slurm, run_dir, job_id)
    assert "requeueing (restart 1, not a failure)" in log
    assert "giving up after 0 failed attempts (MAX_REQUEUES=0)" in log
