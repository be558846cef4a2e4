"""The S3 copy of a framework's checkpoints (training/checkpoint/framework_replica.py): the watcher and the restore
against a moto S3 server over HTTP with real boto3, on directories laid out as Megatron Bridge and NeMo write them;
Megatron Bridge's own readers (its venv) on what a restore puts back."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.s3_standin import s3_bucket_standin
from tests.waiting import wait_until
from training.checkpoint.framework_layout import LAYOUTS, lightning_committed, unfinished_marker
from training.checkpoint.framework_replica import EXIT_RESTORE_FAILED, ReplicaWatcher, main
from training.checkpoint.replica import MANIFEST, STATUS_FILE, CheckpointReplica
from training.checkpoint.replica_location import REPLICA_ENV, parse_replica_url
from training.signals import EXIT_NOT_OWNED
from training.stage import make_client

REPO = Path(__file__).resolve().parents[3]
PROBE = REPO / "tests" / "launch" / "contracts" / "bridge_checkpoint_probe.py"
NEMO_PROBE = REPO / "tests" / "launch" / "contracts" / "nemo_resume_probe.py"
BUCKET = "llm-framework-replica-test"


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with s3_bucket_standin(BUCKET) as url:
        yield url


@pytest.fixture
def replica(endpoint: str, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> CheckpointReplica:
    url = f"s3://{BUCKET}/checkpoints/{request.node.name}/"
    monkeypatch.setenv(REPLICA_ENV, url)
    return CheckpointReplica(parse_replica_url(url))


def _bridge_iteration(run: Path, step: int, finished: bool = True, train_state: bytes | None = None) -> Path:
    """Iteration `step` as Megatron Bridge leaves it: every rank's shards, then (finished) rank 0's train_state.pt and
    run_config.yaml."""
    path = run / "checkpoints" / f"iter_{step:07d}"
    path.mkdir(parents=True)
    for rank in range(2):
        (path / f"__{rank}_0.distcp").write_bytes(os.urandom(64 * 1024))
    (path / ".metadata").write_bytes(os.urandom(512))
    if finished:
        (path / "train_state.pt").write_bytes(train_state if train_state is not None else os.urandom(128))
        (path / "run_config.yaml").write_text(f"step: {step}\n")
    return path


def _files(path: Path) -> dict[str, bytes]:
    return {file.relative_to(path).as_posix(): file.read_bytes() for file in sorted(path.rglob("*")) if file.is_file()}


def _manifest_bytes(replica: CheckpointReplica, slot: int) -> bytes:
    key = f"{replica.target.prefix}slot-{slot}/{MANIFEST}"
    return bytes(replica.client.get_object(Bucket=BUCKET, Key=key)["Body"].read())


def _watcher(replica: CheckpointReplica, run: Path, layout: str = "megatron") -> ReplicaWatcher:
    return ReplicaWatcher(replica, run, LAYOUTS[layout])


def test_the_watcher_copies_a_committed_bridge_iteration_once_it_is_quiet_and_never_an_unfinished_one(
    replica: CheckpointReplica, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    committed = _bridge_iteration(run, 10)
    watcher = _watcher(replica, run)
    assert watcher.pass_once() is None  # seen once: its files may still be growing
    assert replica.latest() is None
    assert watcher.pass_once() == 10  # unchanged since the last pass: copied
    copy = replica.latest()
    assert copy is not None and copy.step == 10
    assert copy.checkpoint == {"layout": "megatron", "path": "checkpoints/iter_0000010"}
    assert {name: record["size"] for name, record in copy.files.items()} == {
        name: len(data) for name, data in _files(committed).items()
    }
    assert json.loads((run / STATUS_FILE).read_text())["step"] == 10

    # A crash mid-save: iteration 20 has every shard but no train_state.pt. Not even the final pass copies it.
    _bridge_iteration(run, 20, finished=False)
    assert watcher.pass_once() is None and watcher.pass_once(final=True) is None
    assert [c.step for c in replica.copies()] == [10]

    # A checkpoint still being written when first seen waits for a pass that finds it unchanged.
    growing = _bridge_iteration(run, 30)
    assert watcher.pass_once() is None
    (growing / "tokenizer.json").write_text("{}")  # Bridge writes tokenizer files after run_config.yaml
    assert watcher.pass_once() is None
    assert watcher.pass_once() == 30
    assert [c.step for c in replica.copies()] == [10, 30]


def test_a_step_the_replica_already_holds_is_not_uploaded_again(
    replica: CheckpointReplica, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    run = tmp_path / "run"
    _bridge_iteration(run, 10)
    assert _watcher(replica, run).pass_once(final=True) == 10
    copy = replica.latest()
    assert copy is not None
    before = _manifest_bytes(replica, copy.slot)
    # The requeued job's watcher starts on the same run: its first pass finds step 10 in the replica.
    assert _watcher(replica, run).pass_once(final=True) == 10
    assert _manifest_bytes(replica, copy.slot) == before  # the manifest was not written again
    assert [c.step for c in replica.copies()] == [10]
    assert f"replica: step-10 is already in {replica.target.url}slot-{copy.slot}/; nothing copied" in caplog.text


def test_a_failed_upload_is_logged_and_recorded_and_the_next_pass_tries_again(
    endpoint: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bucket = f"{BUCKET}-created-later"
    replica = CheckpointReplica(parse_replica_url(f"s3://{bucket}/checkpoints/run/"))
    run = tmp_path / "run"
    _bridge_iteration(run, 10)
    watcher = _watcher(replica, run)
    with caplog.at_level(logging.ERROR, logger="training"):
        assert watcher.pass_once(final=True) is None  # no bucket: the upload fails, nothing is raised
    assert "replica: step-10 NOT copied to" in caplog.text
    assert json.loads((run / STATUS_FILE).read_text())["ok"] is False
    make_client("us-east-1", None, 4).create_bucket(Bucket=bucket)
    assert watcher.pass_once(final=True) == 10
    assert json.loads((run / STATUS_FILE).read_text())["ok"] is True


def test_an_emptied_run_gets_its_newest_bridge_iteration_back_as_megatron_bridge_resumes_it(
    replica: CheckpointReplica, tmp_path: Path, bridge_python: Path
) -> None:
    run = tmp_path / "run"
    watcher = _watcher(replica, run)
    originals = {}
    for step in (10, 20):
        iteration = _bridge_iteration(run, step, train_state=b"")
        subprocess.run([str(bridge_python), str(PROBE), "write", str(iteration), str(step)], check=True)
        originals[step] = _files(iteration)
        assert watcher.pass_once(final=True) == step
    _bridge_iteration(run, 30, finished=False)  # cut short: never copied
    shutil.rmtree(run)  # the file system lost the run

    assert main(["restore", "--run-dir", str(run), "--layout", "megatron"]) == 0
    checkpoints = run / "checkpoints"
    assert sorted(path.name for path in checkpoints.iterdir()) == [
        "iter_0000020",
        "latest_checkpointed_iteration.txt",
        "latest_train_state.pt",
    ]
    assert _files(checkpoints / "iter_0000020") == originals[20]
    result = subprocess.run(
        [str(bridge_python), str(PROBE), "read", str(checkpoints)], capture_output=True, text=True, check=True
    )
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen == {
        "checkpoint_exists": True,
        "train_state_step": 20,
        "tracker": [20, False],
        "iteration_dir": str(checkpoints / "iter_0000020"),
    }
    # Started again with the checkpoint in place: nothing to restore.
    assert main(["restore", "--run-dir", str(run), "--layout", "megatron"]) == 0
    assert sorted(path.name for path in checkpoints.iterdir() if path.name.startswith("iter_")) == ["iter_0000020"]


def test_a_newer_checkpoint_on_the_file_system_is_kept(replica: CheckpointReplica, tmp_path: Path) -> None:
    run = tmp_path / "run"
    _bridge_iteration(run, 10)
    assert _watcher(replica, run).pass_once(final=True) == 10
    shutil.rmtree(run / "checkpoints" / "iter_0000010")
    newer = _bridge_iteration(run, 20)  # written since, not yet copied
    assert main(["restore", "--run-dir", str(run), "--layout", "megatron"]) == 0
    assert [path.name for path in (run / "checkpoints").iterdir()] == [newer.name]


def test_a_nemo_checkpoint_goes_back_in_its_place_and_an_unfinished_one_never_leaves(
    replica: CheckpointReplica, tmp_path: Path, nemo_python: Path
) -> None:
    run = tmp_path / "run"
    checkpoints = run / "nemo" / "run" / "checkpoints"
    last = checkpoints / "run--reduced_train_loss=2.10-step=99-consumed_samples=6400.0-last"
    for sub in ("weights", "context"):
        (last / sub).mkdir(parents=True)
        (last / sub / "data.bin").write_bytes(os.urandom(4096))
    saving = checkpoints / "run--reduced_train_loss=1.90-step=199-consumed_samples=12800.0-last"
    (saving / "weights").mkdir(parents=True)
    (saving / "weights" / "data.bin").write_bytes(os.urandom(4096))
    unfinished_marker(saving).touch()  # rank 0's marker: the save never finished
    original = _files(last)
    assert _watcher(replica, run, "lightning").pass_once(final=True) == 99
    assert [c.step for c in replica.copies()] == [99]

    before = tmp_path / "before" / "checkpoints"
    shutil.copytree(checkpoints, before)  # with the unfinished one and its marker, for NeMo's own choice below
    shutil.rmtree(run)
    assert main(["restore", "--run-dir", str(run), "--layout", "lightning"]) == 0
    assert _files(last) == original
    assert [c.path for c in lightning_committed(run)] == [last]
    assert [path.name for path in checkpoints.iterdir()] == [last.name]  # no staging directory left
    # NeMo's own AutoResume: before the loss it skips the unfinished checkpoint for the one the watcher copied, and
    # after the restore it resumes from the restored one.
    result = subprocess.run(
        [str(nemo_python), str(NEMO_PROBE), str(before), str(checkpoints)], capture_output=True, text=True, check=True
    )
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {"resumes_from": [str(before / last.name), str(last)]}


def test_a_copy_of_another_framework_is_refused_by_name(replica: CheckpointReplica, tmp_path: Path) -> None:
    run = tmp_path / "run"
    _bridge_iteration(run, 10)
    assert _watcher(replica, run).pass_once(final=True) == 10
    shutil.rmtree(run)
    assert main(["restore", "--run-dir", str(run), "--layout", "lightning"]) == EXIT_RESTORE_FAILED
    assert not run.exists()


def test_the_watch_command_outlives_the_stop_signals_and_makes_its_final_pass_when_told(
    replica: CheckpointReplica, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    stop = tmp_path / "stop"
    log = tmp_path / "watch.log"
    with log.open("w") as out:
        watcher = subprocess.Popen(
            [sys.executable, "-m", "training.checkpoint.framework_replica", "watch", "--run-dir", str(run),
             "--layout", "megatron", "--stop-file", str(stop), "--poll-s", "0.2"],
            cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        wait_until(lambda: "replica: copying each committed" in log.read_text(), "the watcher's start", 120)
        for signum in (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT):  # what Slurm and the job script send
            watcher.send_signal(signum)
        _bridge_iteration(run, 10)  # the stop's checkpoint, committed after the signals
        stop.touch()
        assert watcher.wait(timeout=120) == 0, log.read_text()
    finally:
        if watcher.poll() is None:
            watcher.kill()
    copy = replica.latest()
    assert copy is not None and copy.step == 10, log.read_text()
    assert "replica: final pass done" in log.read_text()


def test_a_malformed_replica_setting_is_one_line_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(REPLICA_ENV, "s3://bucket-without-prefix")
    assert main(["restore", "--run-dir", str(tmp_path), "--layout", "megatron"]) == 2  # the job does not retry it
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {REPLICA_ENV}: 's3://bucket-without-prefix' is not")


@pytest.mark.skipif(os.geteuid() != 0, reason="a directory of another user is made by chown: root only")
def test_nothing_is_restored_into_a_run_directory_of_another_user(
    replica: CheckpointReplica, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run = tmp_path / "run"
    _bridge_iteration(run, 10)
    assert _watcher(replica, run).pass_once(final=True) == 10
    shutil.rmtree(run / "checkpoints")
    os.chown(run, 65534, 65534)  # another user's now (as if they had created it first)

    assert main(["restore", "--run-dir", str(run), "--layout", "megatron"]) == EXIT_NOT_OWNED  # not requeued
    assert not (run / "checkpoints").exists()
    assert [record.getMessage() for record in caplog.records if record.levelno >= logging.ERROR] == [
        f"replica: --run-dir {run} is owned by nobody:nogroup (mode 0755), not by this job's user root or one of its "
        "groups: use a run directory of your own (/fsx/runs/<user>/<run>)"
    ]
