"""A lost file system on the real local SLURM cluster: the FSDP job (2 nodes x 1 gloo rank under torchrun) copies
each committed checkpoint to a local S3 stand-in (moto over HTTP, reached by the trainer's ordinary boto3 client);
the run's checkpoint directory is emptied under the running job and a rank killed, and the requeued job resumes
from the S3 copy, losing at most one checkpoint interval and ending with the weights of an uninterrupted run, bit for bit."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from cluster.verify.local_slurm import LocalSlurm
from tests.launch.conftest import write_job
from tests.launch.slurm_helpers import (
    fsdp_argv,
    job_log,
    job_story,
    kill_rank,
    losses_by_step,
    resumed_steps,
    submit,
    wait_for_end,
    wait_for_resume,
)
from tests.s3_standin import s3_standin
from tests.waiting import wait_until
from training.checkpoint.replica import CheckpointReplica
from training.checkpoint.replica_location import REPLICA_ENV, parse_replica_url
from training.export import load_checkpoint_model
from training.stage import make_client

pytestmark = pytest.mark.slurm

STEPS = 30
CHECKPOINT_EVERY = 10  # write_job's
BUCKET = "llm-demo-datasets-222222222222"


@pytest.fixture(scope="module")
def s3() -> Iterator[dict[str, str]]:
    with s3_standin() as env:
        make_client("us-east-1", None, 4).create_bucket(Bucket=BUCKET)
        yield env


def _final_weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint_model(run_dir / "checkpoints" / f"step-{STEPS}").state_dict()


def test_a_run_whose_file_system_lost_its_checkpoints_resumes_from_s3_with_the_uninterrupted_weights(
    local_slurm: LocalSlurm, demo_data: str, tmp_path: Path, s3: dict[str, str]
) -> None:
    config = write_job(tmp_path / "tiny.yaml")
    reference = tmp_path / "reference"
    (ref_job,) = submit(local_slurm, fsdp_argv(config, demo_data, reference, STEPS))

    run_dir = tmp_path / "run"
    url = f"s3://{BUCKET}/checkpoints/{run_dir.name}-{tmp_path.name}/"
    env = {**s3, REPLICA_ENV: url}
    replica = CheckpointReplica(parse_replica_url(url))
    (job_id,) = submit(local_slurm, fsdp_argv(config, demo_data, run_dir, STEPS), env=env)

    # The fault: once a checkpoint's S3 copy is complete, the run's checkpoint directory is emptied under the running
    # job (an rm -rf, a file system replaced by an empty one) and a rank dies (SIGKILL), so the job requeues itself.
    copied = wait_until(
        lambda: replica.latest(), "the first complete S3 copy", story=lambda: job_story(local_slurm, run_dir, job_id)
    )
    checkpoints = run_dir / "checkpoints"
    assert sorted(checkpoints.glob("step-*")), "the run committed nothing locally"
    for path in list(checkpoints.iterdir()):
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    kill_rank(run_dir, rank=1)
    killed = time.monotonic()
    killed_at = max(losses_by_step(run_dir))
    newest = replica.latest()
    assert newest is not None and newest.step >= copied.step

    # Recovery: the requeued attempt's rank 0 restores the newest copy before any rank loads it.
    restored_step = wait_for_resume(run_dir, 1)
    recovery_s = time.monotonic() - killed
    job = wait_for_end(local_slurm, job_id, run_dir=run_dir)
    story = job_story(local_slurm, run_dir, job_id)
    assert (job["JobState"], job["ExitCode"], job["Restarts"]) == ("COMPLETED", "0:0", "1"), story
    log = job_log(run_dir)
    assert "requeueing (failure 1 of at most 10)" in log, story
    assert f"restoring it from {url}slot-{newest.slot}/" in log, story
    assert restored_step == newest.step and resumed_steps(run_dir) == [newest.step]
    lost = killed_at - restored_step
    assert 0 <= lost <= CHECKPOINT_EVERY, (killed_at, restored_step)
    print(f"lost file system: killed at step {killed_at}, resumed from S3 step-{restored_step} ({lost} steps lost), "
          f"{recovery_s:.1f} s from the kill to the resume")  # fmt: skip

    # The end: the final checkpoint's copy went up, and the weights equal the uninterrupted run's, bit for bit.
    assert replica.latest() is not None and replica.latest().step == STEPS  # type: ignore[union-attr]
    assert json.loads((run_dir / "checkpoints" / "replica.json").read_text())["step"] == STEPS
    ref = wait_for_end(local_slurm, ref_job, run_dir=reference)
    assert (ref["JobState"], ref["ExitCode"]) == ("COMPLETED", "0:0"), job_story(local_slurm, reference, ref_job)
    expected, got = losses_by_step(reference), losses_by_step(run_dir)
    assert sorted(got) == list(range(1, STEPS + 1))
    for step in range(restored_step + 1, STEPS + 1):
        assert abs(got[step] - expected[step]) <= 1e-6, (step, got[step], expected[step])
    reference_weights, weights = _final_weights(reference), _final_weights(run_dir)
    assert sorted(weights) == sorted(reference_weights)
    for name, tensor in weights.items():
        assert torch.equal(tensor, reference_weights[name]), name
