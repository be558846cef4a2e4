"""kill -9 around an asynchronous checkpoint, on the real local SLURM cluster: the rendered FSDP job (2 nodes x 1 gloo
rank under torchrun) with checkpoint.async_save, killed just after a save committed and while one is being written.

Each run must requeue itself, resume from the newest committed checkpoint, lose less than one checkpoint interval,
and end with the losses and final weights of an uninterrupted run (issue 42, item 2).
"""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest

from cluster.verify.local_slurm import LocalSlurm
from tests.launch.conftest import write_job
from tests.launch.slurm_helpers import (
    assert_same_final_weights,
    assert_same_losses,
    fsdp_argv,
    job_log,
    job_story,
    resumed_steps,
    submit,
    train_records,
    trainer_rank_pid,
    wait_for_end,
    wait_for_resume,
)
from tests.waiting import wait_until
from training.checkpoint.layout import MARKER, step_dir, tmp_dir

pytestmark = pytest.mark.slurm

STEPS = 40
EVERY = 10


def _async_job(directory: Path) -> Path:
    return write_job(directory / "tiny.yaml", checkpoint={"every": EVERY, "async_save": True})


def _checkpoints(run_dir: Path) -> Path:
    return run_dir / "checkpoints"


def _last_logged_step(run_dir: Path) -> int:
    records = train_records(run_dir)
    return int(records[-1]["step"]) if records else 0


@pytest.fixture(scope="module")
def reference(local_slurm_session: LocalSlurm, demo_data: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same async job, never interrupted."""
    local_slurm_session.reset()
    base = tmp_path_factory.mktemp("async-reference")
    run_dir = base / "run"
    (job_id,) = submit(local_slurm_session, fsdp_argv(_async_job(base), demo_data, run_dir, STEPS))
    job = wait_for_end(local_slurm_session, job_id, run_dir=run_dir)
    assert (job["JobState"], job["Restarts"]) == ("COMPLETED", "0"), job_story(local_slurm_session, run_dir, job_id)
    return run_dir


def _assert_matches_reference(run_dir: Path, reference: Path) -> None:
    """Every step's loss and the final weights of the uninterrupted run, bit for bit."""
    assert_same_losses(run_dir, reference, STEPS)
    assert_same_final_weights(run_dir, reference, STEPS)


def test_kill_9_just_after_an_async_save_commits_resumes_from_it(
    local_slurm: LocalSlurm, demo_data: str, reference: Path, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    (job_id,) = submit(local_slurm, fsdp_argv(_async_job(tmp_path), demo_data, run_dir, STEPS))
    marker = step_dir(_checkpoints(run_dir), EVERY) / MARKER
    wait_until(marker.is_file, f"{marker}", story=lambda: job_log(run_dir), poll_s=0.01)
    os.kill(trainer_rank_pid(run_dir, rank=1), signal.SIGKILL)
    killed = time.monotonic()
    # Rank 0 cannot finish another step without rank 1: the last logged step is where the run died.
    killed_at = _last_logged_step(run_dir)
    resumed = wait_for_resume(run_dir, 1)
    recovered_s = time.monotonic() - killed
    job = wait_for_end(local_slurm, job_id, run_dir=run_dir)
    story = job_story(local_slurm, run_dir, job_id)
    assert (job["JobState"], job["Restarts"]) == ("COMPLETED", "1"), story
    assert resumed_steps(run_dir) == [EVERY] == [resumed], story
    # Committed when its write finished, before the next interval's save: a crash costs less than one interval.
    # (Before, step-10 was committed only inside the step-20 save, so this kill came at step 20 or later.)
    assert killed_at - EVERY < EVERY, f"killed at step {killed_at}, resumed from {EVERY}"
    print(f"kill -9 after the step-{EVERY} commit: killed at step {killed_at}, resumed from {EVERY} "
          f"({killed_at - EVERY} steps lost), {recovered_s:.0f} s from the kill to the resume")  # fmt: skip
    _assert_matches_reference(run_dir, reference)


def test_kill_9_while_an_async_save_is_written_resumes_from_the_previous_one_and_removes_it(
    local_slurm: LocalSlurm, demo_data: str, reference: Path, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    checkpoints = _checkpoints(run_dir)
    (job_id,) = submit(local_slurm, fsdp_argv(_async_job(tmp_path), demo_data, run_dir, STEPS))
    wait_until((step_dir(checkpoints, EVERY) / MARKER).is_file, "the first commit", story=lambda: job_log(run_dir))
    # Caught in the act: the next save's directory exists. Rank 0 alone commits, so once it is stopped nothing can;
    # a save that committed before the stop landed (a fast disk) moves the kill to the next interval's save.
    for step in range(2 * EVERY, STEPS, EVERY):
        wait_until(
            lambda: tmp_dir(checkpoints, step).is_dir() or step_dir(checkpoints, step).is_dir(),  # noqa: B023
            f"the step-{step} save",
            poll_s=0.005,
        )
        rank0 = trainer_rank_pid(run_dir, rank=0)
        os.kill(rank0, signal.SIGSTOP)
        if not (step_dir(checkpoints, step) / MARKER).is_file():
            break
        os.kill(rank0, signal.SIGCONT)
    else:
        pytest.fail(f"every save up to step {STEPS - EVERY} committed before rank 0 could be stopped")
    os.kill(rank0, signal.SIGKILL)
    killed = time.monotonic()
    resumed = wait_for_resume(run_dir, 1)
    recovered_s = time.monotonic() - killed
    job = wait_for_end(local_slurm, job_id, run_dir=run_dir)
    story = job_story(local_slurm, run_dir, job_id)
    assert (job["JobState"], job["Restarts"]) == ("COMPLETED", "1"), story
    assert resumed == step - EVERY, story  # the previous committed save
    assert re.search(rf"removing incomplete \S+/step-{step}(\.tmp)? \(no {MARKER} marker\)", job_log(run_dir)), story
    print(
        f"kill -9 during the step-{step} save: resumed from {resumed}, {recovered_s:.0f} s from the kill to the resume"
    )
    _assert_matches_reference(run_dir, reference)
