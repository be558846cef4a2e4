"""A Megatron Bridge run whose file system lost its checkpoints, on the real local SLURM cluster: the real nemo.sh and
common.sh (replica_restore, replica_watch_start/stop) around a stand-in step that saves in Megatron Bridge's layout
(tests/launch/standins/bridge_checkpoints_step.py); a local S3 stand-in (moto over HTTP) reached by the watcher's
ordinary boto3 client. The job is cancelled while a save is in flight, the run directory is deleted, and the same
command submitted again resumes from the newest committed iteration, restored from S3."""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from cluster.verify.local_slurm import LocalSlurm
from tests.launch.conftest import REPO, install_recorders, write_job
from tests.launch.slurm_helpers import job_log, job_story, submit, wait_for_end
from tests.s3_standin import s3_standin
from tests.waiting import wait_until
from training.checkpoint.replica import STATUS_FILE, CheckpointReplica
from training.checkpoint.replica_location import REPLICA_ENV, parse_replica_url
from training.stage import make_client

pytestmark = pytest.mark.slurm

STANDINS = Path(__file__).resolve().parent / "standins"
BUCKET = "llm-demo-datasets-222222222222"
EVERY = 10  # the stand-in's checkpoint interval


@pytest.fixture(scope="module")
def s3() -> Iterator[dict[str, str]]:
    with s3_standin() as env:
        make_client("us-east-1", None, 4).create_bucket(Bucket=BUCKET)
        yield env


def _spec_without_a_replica(path: Path) -> Path:
    """The default spec with no data.checkpoint_replica: the script then exports none, and the job keeps the
    LLM_CHECKPOINT_REPLICA it was submitted with (the moto server's bucket; moto serves no access point ARN)."""
    spec = yaml.safe_load((REPO / "spec" / "default.yaml").read_text())
    spec["data"].pop("checkpoint_replica", None)
    path.write_text(yaml.safe_dump(spec))
    return path


def _starts(run_dir: Path) -> list[dict[str, float]]:
    path = run_dir / "standin-starts"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _files(path: Path) -> dict[str, bytes]:
    return {file.relative_to(path).as_posix(): file.read_bytes() for file in sorted(path.rglob("*")) if file.is_file()}


def test_a_bridge_run_cancelled_mid_save_and_emptied_resumes_from_the_newest_committed_iteration_in_s3(
    local_slurm: LocalSlurm, demo_data: str, tmp_path: Path, s3: dict[str, str]
) -> None:
    recorders = install_recorders(tmp_path / "bin", "pyxis-srun")
    run_dir = tmp_path / "bridge-run"
    config = write_job(tmp_path / "job.yaml", data={"global_batch_size": 64})
    spec = _spec_without_a_replica(tmp_path / "spec.yaml")
    argv = ["--backend", "nemo", "--model", str(config), "--nodes", "2", "--data-prefix", demo_data,
            "--run-dir", str(run_dir), "--partition", "local", "--spec", str(spec)]  # fmt: skip
    url = f"s3://{BUCKET}/checkpoints/{tmp_path.name}/"
    env = {
        **s3,
        REPLICA_ENV: url,
        "CONTAINER_SRUN": str(STANDINS / "pyxis-srun"),
        "RECORDER": str(recorders / "pyxis-srun"),
        "RECORD_LOG": str(tmp_path / "record.jsonl"),
        "HOST_PYTHON": sys.executable,
        "STANDIN_PROGRAM": str(STANDINS / "bridge_checkpoints_step.py"),
    }
    replica = CheckpointReplica(parse_replica_url(url))
    (job_id,) = submit(local_slurm, argv, env)

    # The fault: iteration 20 is in S3 and iteration 30's save is in flight (shards, no train_state.pt) when the
    # user cancels the job.
    wait_until(
        lambda: (run_dir / "standin-saving-30").exists() and (c := replica.latest()) is not None and c.step == 20,
        "iteration 20 in S3 while iteration 30 is being saved",
        story=lambda: job_story(local_slurm, run_dir, job_id),
    )
    local_slurm.run(["scancel", job_id])
    job = wait_for_end(local_slurm, job_id, run_dir=run_dir)
    story = job_story(local_slurm, run_dir, job_id)
    assert job["JobState"] == "CANCELLED", story
    log = job_log(run_dir)
    assert "got SIGTERM: cancelled (scancel)" in log and "replica: final pass done" in log, story
    # The newest committed iteration went up (10 was superseded before it was quiet); the unfinished 30 never did.
    assert [copy.step for copy in replica.copies()] == [20], story
    checkpoints = run_dir / "checkpoints"
    committed_20 = _files(checkpoints / "iter_0000020")
    assert not (checkpoints / "iter_0000030" / "train_state.pt").exists()

    # The file system loses the run: the whole run directory is gone. The same command again.
    shutil.rmtree(run_dir)
    submitted = time.time()
    (again,) = submit(local_slurm, argv, env)
    job = wait_for_end(local_slurm, again, run_dir=run_dir)
    story = job_story(local_slurm, run_dir, again)
    assert (job["JobState"], job["ExitCode"]) == ("COMPLETED", "0:0"), story
    log = job_log(run_dir)
    assert f"restoring it from {url}slot-" in log, story
    (start,) = _starts(run_dir)
    assert start["resumed"] == 20, story
    lost = 30 - start["resumed"]  # the cancelled job was saving iteration 30
    assert lost <= EVERY
    recovery_s = start["time"] - submitted
    print(f"bridge run cancelled mid-save of iteration 30 and its run directory deleted: resumed from S3 iteration "
          f"{start['resumed']} ({lost} iterations lost), {recovery_s:.1f} s from the new submission to the step's start")  # fmt: skip
    restored = _files(run_dir / "checkpoints" / "iter_0000020")
    assert restored == committed_20
    # The resumed run's last checkpoint went up before the job ended (the watcher's final pass at the latest).
    newest = replica.latest()
    assert newest is not None and newest.step == 40, story
    assert json.loads((run_dir / STATUS_FILE).read_text()) | {"seconds": 0} == {
        "url": url,
        "step": 40,
        "ok": True,
        "slot": newest.slot,
        "bytes": sum(int(record["size"]) for record in newest.files.values()),
        "seconds": 0,
    }
