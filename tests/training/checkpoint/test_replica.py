"""The S3 copy of committed checkpoints: real boto3 against a moto S3 server over HTTP, real DCP checkpoints written
by CheckpointManager (one gloo rank)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.s3_standin import s3_bucket_standin
from training.checkpoint.errors import CheckpointError
from training.checkpoint.layout import MARKER, complete_checkpoints, step_dir
from training.checkpoint.manager import CheckpointManager
from training.checkpoint.replica import MANIFEST, STATUS_FILE, CheckpointReplica
from training.checkpoint.replica_location import REPLICA_ENV, ReplicaError, parse_replica_url
from training.checkpoint.state import training_state
from training.config import CheckpointSection
from training.stage import make_client

from .test_manager import _trained, _weights

pytestmark = pytest.mark.usefixtures("process_group")
BUCKET = "llm-demo-datasets-222222222222"
URL = f"s3://{BUCKET}/checkpoints/run-a/"


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with s3_bucket_standin(BUCKET) as url:
        yield url


@pytest.fixture
def replica_url(endpoint: str, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> str:
    url = f"s3://{BUCKET}/checkpoints/{request.node.name.replace('[', '-').replace(']', '')}/"
    monkeypatch.setenv(REPLICA_ENV, url)
    return url


def _manager(root: Path, keep_last: int = 2) -> CheckpointManager:
    return CheckpointManager(root, CheckpointSection(keep_last=keep_last), rank=0, world_size=1, param_count=10_000)


def _save(manager: CheckpointManager, step: int, seed: int) -> dict[str, torch.Tensor]:
    model, optimizer = _trained(seed)
    manager.save(step, training_state(model, optimizer), {"step": step}, {"torch": torch.get_rng_state()})
    return _weights(model)


def _objects(prefix: str) -> dict[str, bytes]:
    client = make_client("us-east-1", None, 4)
    listing = client.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])
    return {item["Key"]: client.get_object(Bucket=BUCKET, Key=item["Key"])["Body"].read() for item in listing}


def _manifest(url: str, slot: int) -> dict[str, Any]:
    prefix = parse_replica_url(url).prefix
    return json.loads(_objects(f"{prefix}slot-{slot}/{MANIFEST}")[f"{prefix}slot-{slot}/{MANIFEST}"])


def test_every_commit_reaches_s3_with_its_sizes_and_checksums_and_the_manifest_written_last(
    replica_url: str, tmp_path: Path
) -> None:
    root = tmp_path / "checkpoints"
    manager = _manager(root)
    assert manager.prepare() is None
    _save(manager, 2, seed=0)
    _save(manager, 4, seed=1)
    manager.finish_replica()
    prefix = parse_replica_url(replica_url).prefix
    stored = _objects(prefix)
    manifests = [_manifest(replica_url, slot) for slot in (0, 1)]
    assert sorted(m["step"] for m in manifests) == [2, 4] and {m["state"] for m in manifests} == {"complete"}
    latest = max(manifests, key=lambda m: m["step"])
    slot = manifests.index(latest)
    local = step_dir(root, 4)
    expected = sorted(p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file() and p.name != MARKER)
    assert sorted(latest["files"]) == expected and ".metadata" in expected and "trainer_state.json" in expected
    for relative, record in latest["files"].items():
        body = stored[f"{prefix}slot-{slot}/{relative}"]
        assert body == (local / relative).read_bytes()
        assert record["size"] == len(body)
    status = json.loads((root / STATUS_FILE).read_text())
    assert status["ok"] and status["step"] == 4 and status["url"] == replica_url


def test_an_emptied_file_system_resumes_from_the_replica_bit_exact(replica_url: str, tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    manager = _manager(root)
    manager.prepare()
    saved = _save(manager, 6, seed=3)
    manager.finish_replica()
    local_files = {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}

    for path in list(root.iterdir()):  # an rm -rf of the run's checkpoints
        if path.is_dir():
            for file in sorted(path.rglob("*"), reverse=True):
                file.unlink() if file.is_file() else file.rmdir()
            path.rmdir()
    assert complete_checkpoints(root) == []

    again = _manager(root)
    latest = again.prepare()
    assert latest is not None and latest[0] == 6
    restored = {p.relative_to(root).as_posix(): p.read_bytes() for p in latest[1].rglob("*") if p.is_file()}
    for relative, body in local_files.items():
        if relative.startswith("step-6/") and not relative.endswith(MARKER):
            assert restored[relative] == body, relative
    model, optimizer = _trained(seed=99)
    state, _ = again.load(latest[1], training_state(model, optimizer))
    assert state["step"] == 6
    for name, tensor in _weights(model).items():
        assert torch.equal(tensor, saved[name]), name


def test_the_replica_is_restored_only_when_newer_than_the_file_system(replica_url: str, tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    manager = _manager(root)
    manager.prepare()
    _save(manager, 2, seed=0)
    manager.finish_replica()
    assert _manager(root).prepare() == (2, step_dir(root, 2))  # same step here: nothing downloaded
    assert "restored_from" not in (step_dir(root, 2) / MARKER).read_text()


def test_a_copy_whose_manifest_says_writing_is_never_restored(replica_url: str, tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    manager = _manager(root)
    manager.prepare()
    _save(manager, 2, seed=0)
    _save(manager, 4, seed=1)
    manager.finish_replica()
    target = parse_replica_url(replica_url)
    replica = CheckpointReplica(target)
    newest = replica.latest()
    assert newest is not None and newest.step == 4
    # What an upload of step 6 that crashed part-way leaves: the older slot's manifest says writing.
    replica._put_manifest((newest.slot + 1) % 2, {"state": "writing", "step": 6})
    assert [copy.step for copy in replica.copies()] == [4]
    empty = tmp_path / "empty"
    assert _manager(empty).prepare() == (4, step_dir(empty, 4))


def test_a_corrupted_copy_fails_the_restore_naming_the_file(replica_url: str, tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    manager = _manager(root)
    manager.prepare()
    _save(manager, 2, seed=0)
    manager.finish_replica()
    target = parse_replica_url(replica_url)
    copy = CheckpointReplica(target).latest()
    assert copy is not None
    make_client("us-east-1", None, 4).put_object(
        Bucket=BUCKET, Key=f"{target.prefix}slot-{copy.slot}/trainer_state.json", Body=b'{"step": 999}'
    )
    with pytest.raises(CheckpointError, match=r"slot-\d/trainer_state.json does not match its manifest"):
        _manager(tmp_path / "empty").prepare()
    assert complete_checkpoints(tmp_path / "empty") == []  # nothing half-restored counts


def test_a_failed_upload_is_loud_and_training_goes_on(
    endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(REPLICA_ENV, "s3://bucket-that-goes/checkpoints/run/")
    client = make_client("us-east-1", None, 4)
    client.create_bucket(Bucket="bucket-that-goes")
    root = tmp_path / "checkpoints"
    manager = _manager(root)
    manager.prepare()  # an empty replica: nothing to restore
    client.delete_bucket(Bucket="bucket-that-goes")  # the replica is gone from here on
    with caplog.at_level(logging.ERROR, logger="training"):
        _save(manager, 2, seed=0)
        manager.finish_replica()
        _save(manager, 4, seed=1)  # the next save still runs
        manager.finish_replica()
    assert [step for step, _ in complete_checkpoints(root)] == [2, 4]
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 2 and "replica: step-4 NOT copied to s3://bucket-that-goes/checkpoints/run/" in errors[1]
    assert "the file system holds the only copy" in errors[1] and "NoSuchBucket" in errors[1]
    status = json.loads((root / STATUS_FILE).read_text())
    assert status["ok"] is False and status["step"] == 4 and "NoSuchBucket" in status["error"]


@pytest.mark.parametrize(
    "url",
    ["s3://bucket", "s3://bucket/", "s3://bucket/no-trailing-slash", "https://bucket/x/", "s3://Bad_Bucket/x/"],
)
def test_a_bad_replica_url_is_one_line_naming_the_variable_and_value(url: str) -> None:
    with pytest.raises(ReplicaError) as caught:
        parse_replica_url(url)
    assert str(caught.value).startswith(f"{REPLICA_ENV}: {url!r} is not s3://BUCKET/PREFIX/")
    assert "\n" not in str(caught.value)


def test_an_access_point_arn_is_the_bucket_and_names_the_region() -> None:
    target = parse_replica_url(
        "s3://arn:aws:s3:eu-west-1:222222222222:accesspoint/llm-demo-checkpoints/checkpoints/r1/"
    )
    assert target.bucket == "arn:aws:s3:eu-west-1:222222222222:accesspoint/llm-demo-checkpoints"
    assert (target.prefix, target.region) == ("checkpoints/r1/", "eu-west-1")


def test_a_replica_that_cannot_be_read_is_logged_and_a_run_without_checkpoints_starts(
    endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A first run where S3 does not answer trains from step 0, loudly; the copy a lost file system left stays in the
    slot with the highest step, which uploads never overwrite (CheckpointReplica.upload)."""
    monkeypatch.setenv(REPLICA_ENV, "s3://no-such-bucket-here/checkpoints/run/")
    with caplog.at_level("ERROR", logger="training"):
        assert _manager(tmp_path / "checkpoints").prepare() is None
    (line,) = [record.getMessage() for record in caplog.records if record.levelname == "ERROR"]
    assert (
        line.startswith(
            "replica: s3://no-such-bucket-here/checkpoints/run/: cannot read slot-0/MANIFEST.json: NoSuchBucket"
        )
        and "starting from step 0" in line
    ), line
