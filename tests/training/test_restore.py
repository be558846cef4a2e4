"""llm-restore against a moto S3 server over HTTP, with checkpoints CheckpointManager wrote and uploaded."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from tests.s3_standin import s3_bucket_standin
from training.checkpoint.framework_layout import LAYOUTS
from training.checkpoint.framework_replica import ReplicaWatcher
from training.checkpoint.layout import MARKER, complete_checkpoints, step_dir
from training.checkpoint.manager import CheckpointManager
from training.checkpoint.replica import CheckpointReplica
from training.checkpoint.replica_location import REPLICA_ENV, replica_from_env
from training.checkpoint.state import training_state
from training.config import CheckpointSection
from training.restore import main

from .checkpoint.test_framework_replica import _bridge_iteration
from .checkpoint.test_manager import _trained

pytestmark = pytest.mark.usefixtures("process_group")
BUCKET = "llm-restore-test"


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with s3_bucket_standin(BUCKET) as url:
        yield url


@pytest.fixture
def run_dir(endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A run whose steps 2 and 4 went up to its replica; then its checkpoints are deleted."""
    monkeypatch.delenv("LLM_TRAINING_SPEC", raising=False)
    monkeypatch.setenv(REPLICA_ENV, f"s3://{BUCKET}/checkpoints/{tmp_path.name}/")
    run = tmp_path / "run"
    manager = CheckpointManager(run / "checkpoints", CheckpointSection(), rank=0, world_size=1, param_count=10_000)
    manager.prepare()
    for step in (2, 4):
        model, optimizer = _trained(step)
        manager.save(step, training_state(model, optimizer), {"step": step}, {"torch": torch.get_rng_state()})
    manager.finish_replica()
    shutil.rmtree(run / "checkpoints")
    return run


def test_list_shows_the_complete_copies(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--run-dir", str(run_dir), "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ["step-2", "step-4"]
    assert not (run_dir / "checkpoints").exists()


def test_restore_brings_back_the_newest_copy_committed(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--run-dir", str(run_dir)]) == 0
    root = run_dir / "checkpoints"
    assert complete_checkpoints(root) == [(4, step_dir(root, 4))]
    assert "restored_from" in (step_dir(root, 4) / MARKER).read_text()
    assert capsys.readouterr().out.startswith(f"restored {step_dir(root, 4)} from s3://{BUCKET}/")
    assert main(["--run-dir", str(run_dir)]) == 0  # again: nothing to do
    assert "already committed here" in capsys.readouterr().out


def test_restore_of_an_older_step_on_request(run_dir: Path) -> None:
    assert main(["--run-dir", str(run_dir), "--step", "2"]) == 0
    assert [step for step, _ in complete_checkpoints(run_dir / "checkpoints")] == [2]


def test_a_step_the_replica_lacks_is_one_line_naming_what_it_holds(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--run-dir", str(run_dir), "--step", "3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--step: s3://" in err and "(complete copies: step-2, step-4)" in err


def test_the_replica_defaults_to_the_specs_for_this_run_directory(
    endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(REPLICA_ENV, raising=False)
    monkeypatch.delenv("LLM_TRAINING_SPEC", raising=False)
    # The default spec's access point ARN: moto cannot serve ARNs, so the listing fails, naming the spec's replica.
    assert main(["--run-dir", str(tmp_path / "r"), "--list"]) == 2
    err = capsys.readouterr().err
    prefix = str(tmp_path / "r").strip("/")
    assert f"s3://arn:aws:s3:us-east-1:222222222222:accesspoint/llm-demo-checkpoints/checkpoints/runs/{prefix}/" in err


def test_a_megatron_bridge_runs_copy_goes_back_in_its_place_with_the_trackers_naming_it(
    endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(REPLICA_ENV, f"s3://{BUCKET}/checkpoints/{tmp_path.name}-bridge/")
    run = tmp_path / "bridge-run"
    replica = CheckpointReplica(replica_from_env())  # type: ignore[arg-type]
    watcher = ReplicaWatcher(replica, run, LAYOUTS["megatron"])
    for step in (10, 20):
        _bridge_iteration(run, step)
        assert watcher.pass_once(final=True) == step
    original = (run / "checkpoints" / "iter_0000020" / "train_state.pt").read_bytes()
    shutil.rmtree(run)

    assert main(["--run-dir", str(run), "--list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in listed] == ["step-10", "step-20"]
    assert listed[1].endswith("checkpoints/iter_0000020")
    assert main(["--run-dir", str(run)]) == 0
    checkpoints = run / "checkpoints"
    assert capsys.readouterr().out.startswith(f"restored {checkpoints / 'iter_0000020'} from s3://{BUCKET}/")
    assert (checkpoints / "latest_train_state.pt").read_bytes() == original
    assert (checkpoints / "latest_checkpointed_iteration.txt").read_text() == "20"
    assert not (checkpoints / "iter_0000020" / MARKER).exists()  # Megatron Bridge's layout, nothing of ours
    assert main(["--run-dir", str(run)]) == 0  # again: nothing to do
    assert "already committed" in capsys.readouterr().out
