"""Issue 43, attack 3: another user plants a "committed" checkpoint where a victim's job will resume from it.

The attacker is a second Linux user (`nobody`) working in a world-writable sticky folder, as /fsx/runs is on the
cluster (root 1777). What it plants is a real committed step whose DCP `.metadata` (which DCP unpickles) and RNG file
carry a pickle that runs a command: were either loaded, the command would write the victim's uid into a marker file.
The victim is root here, submitting with the real `llm-submit` to the local SLURM cluster, its job under torchrun.
"""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster.verify.local_slurm import LocalSlurm
from launch.submit import main as submit_main
from launch.submit import parse_options, render, write
from tests.launch.conftest import write_job
from tests.launch.slurm_helpers import fsdp_argv, job_log, job_story, submit, wait_for_end
from tests.launch.slurm_user import JOB_UID, shared_work_dir
from training.checkpoint.layout import MARKER, RNG_DIR, TRAINER_STATE
from training.signals import EXIT_NOT_OWNED

pytestmark = pytest.mark.slurm

STEPS = 20
PLANTED_STEP = 10


class _RunsACommand:
    """Unpickled, runs `command` with the unpickling process's rights."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (self.command,))


@pytest.fixture
def shared_runs() -> Iterator[Path]:
    """A folder like /fsx/runs: root's, mode 1777, every user may create a directory in it."""
    work = shared_work_dir("planted-")
    runs = work / "runs"
    runs.mkdir()
    runs.chmod(0o1777)
    try:
        yield runs
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _as_attacker(script: str) -> None:
    """Runs `script` (bash) as the second user, with none of the test's groups."""
    command = ["setpriv", f"--reuid={JOB_UID}", f"--regid={JOB_UID}", "--clear-groups", "bash", "-euc", script]
    result = subprocess.run(command, cwd="/", capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr


def _plant_committed_step(checkpoints: Path, marker: Path) -> None:
    """The attacker creates `checkpoints`/step-N/ with a committed marker and code in every pickle the trainer
    would read; the payload (world-readable, in the folder above) is written here, copied by the attacker."""
    payload = marker.with_name("payload.pickle")
    payload.write_bytes(pickle.dumps(_RunsACommand(f"id -u > {marker}")))
    payload.chmod(0o644)
    step = checkpoints / f"step-{PLANTED_STEP}"
    _as_attacker(
        f"mkdir -p {step}/{RNG_DIR}; cp {payload} {step}/.metadata; "
        f"for rank in 0 1; do cp {payload} {step}/{RNG_DIR}/rank$rank.pt; done; "
        f"echo '{{\"step\": {PLANTED_STEP}}}' > {step}/{TRAINER_STATE}; echo '{{\"step\": {PLANTED_STEP}}}' > {step}/{MARKER}",
    )
    assert os.stat(step / ".metadata").st_uid == JOB_UID


def test_a_job_never_loads_a_checkpoint_another_user_planted_and_ends_not_requeued(
    local_slurm: LocalSlurm, demo_data: str, shared_runs: Path, tmp_path: Path
) -> None:
    # The victim's job keeps its checkpoints under a predictable shared name, which the attacker took first.
    planted = shared_runs / "llama3-8b-checkpoints"
    marker = shared_runs.parent / "code-ran-as-uid"
    _plant_committed_step(planted, marker)
    run_dir = tmp_path / "run"
    job = write_job(tmp_path / "tiny.yaml", checkpoint={"dir": str(planted)})

    (job_id,) = submit(local_slurm, fsdp_argv(job, demo_data, run_dir, STEPS))
    record = wait_for_end(local_slurm, job_id, run_dir=run_dir)
    story = job_story(local_slurm, run_dir, job_id)

    assert not marker.exists(), f"the planted pickle ran as uid {marker.read_text().strip()}\n{story}"
    assert (record["JobState"], record["Restarts"]) == ("FAILED", "0"), story
    assert record["ExitCode"] == f"{EXIT_NOT_OWNED}:0", story
    log = job_log(run_dir)
    refusal = f"checkpoint.dir {planted} is owned by nobody:nogroup (mode 0755), not by this job's user root"
    assert refusal in log, story
    assert f"failed with exit {EXIT_NOT_OWNED} (" in log and "not requeued" in log, story
    assert "resumed from" not in log, story
    # The victim wrote nothing there either.
    assert sorted(p.name for p in planted.iterdir()) == [f"step-{PLANTED_STEP}"]


def test_llm_submit_refuses_a_run_directory_another_user_created(
    local_slurm: LocalSlurm, demo_data: str, shared_runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The documented name, taken first by the attacker, with a committed step in it.
    run_dir = shared_runs / "llama3-8b"
    marker = shared_runs.parent / "code-ran-as-uid"
    _plant_committed_step(run_dir / "checkpoints", marker)
    job = write_job(tmp_path / "tiny.yaml")
    os.environ["SLURM_CONF"] = str(local_slurm.conf_path)
    try:
        code = submit_main(fsdp_argv(job, demo_data, run_dir, STEPS))
    finally:
        del os.environ["SLURM_CONF"]
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.strip().splitlines() == [
        f"error: --run-dir: {run_dir} is owned by nobody:nogroup (mode 0755), not by this job's user root or one of "
        "its groups: use a run directory of your own (/fsx/runs/<user>/<run>)"
    ]
    assert local_slurm.run(["squeue", "-h", "-o", "%i"]).stdout.strip() == ""
    assert sorted(p.name for p in run_dir.iterdir()) == ["checkpoints"]  # no lease, no logs, no configs
    assert not run_dir.with_name("llama3-8b.fsdp.sbatch").exists()
    assert not marker.exists()


def test_a_saved_script_submitted_again_into_a_run_directory_another_user_recreated_ends_at_once(
    local_slurm: LocalSlurm, demo_data: str, shared_runs: Path, tmp_path: Path
) -> None:
    # The victim's earlier submission left its script beside the run directory; the victim then removed the run.
    run_dir = shared_runs / "llama3-8b"
    rendered = render(parse_options(fsdp_argv(write_job(tmp_path / "tiny.yaml"), demo_data, run_dir, STEPS)), "t")
    write(rendered)
    (script,) = [rendered_script.path for rendered_script in rendered.scripts]
    config = shared_runs.parent / "job-config.yaml"  # the attacker needs a config the trainer accepts: any will do
    shutil.copyfile(run_dir / "job-config.yaml", config)
    config.chmod(0o644)
    shutil.rmtree(run_dir)
    # The attacker creates it again first, with a committed step, and lets anyone write there.
    marker = shared_runs.parent / "code-ran-as-uid"
    _plant_committed_step(run_dir / "checkpoints", marker)
    _as_attacker(f"cp {config} {run_dir}/job-config.yaml; mkdir -m 777 {run_dir}/logs; chmod 777 {run_dir}")

    job_id = local_slurm.run(["sbatch", "--parsable", str(script)]).stdout.strip().split(";")[0]
    record = wait_for_end(local_slurm, job_id, run_dir=run_dir)
    story = job_story(local_slurm, run_dir, job_id)

    assert not marker.exists(), f"the planted pickle ran as uid {marker.read_text().strip()}\n{story}"
    assert (record["JobState"], record["Restarts"], record["ExitCode"]) == ("FAILED", "0", f"{EXIT_NOT_OWNED}:0"), story
    refusal = (
        f"refused: --run-dir {run_dir} is owned by nobody:nogroup (mode 0777), not by this job's user root or one of "
        "its groups: use a run directory of your own (/fsx/runs/<user>/<run>); this job read and wrote nothing there, "
        f"not requeued (exit {EXIT_NOT_OWNED})"
    )
    assert refusal in job_log(run_dir), story
    assert not (run_dir / ".lease").exists() and "step: " not in job_log(run_dir), story  # before the lease, no step
