"""When a framework's checkpoint is committed (Megatron Bridge, NeMo 2, NxDT): the one rule llm-follow and the replica
watcher read, on directories laid out as each framework writes them."""

from __future__ import annotations

from pathlib import Path

from slurm.backends import BACKENDS
from training.checkpoint.framework_layout import (
    LAYOUTS,
    lightning_committed,
    megatron_committed,
    newest_committed,
    unfinished_marker,
)


def _bridge_iteration(run: Path, step: int, finished: bool) -> Path:
    path = run / "checkpoints" / f"iter_{step:07d}"
    path.mkdir(parents=True)
    (path / "__0_0.distcp").write_bytes(b"shard")
    if finished:
        (path / "train_state.pt").write_bytes(b"state")
    return path


def test_a_bridge_iteration_counts_once_rank_0_wrote_its_train_state(tmp_path: Path) -> None:
    _bridge_iteration(tmp_path, 10, finished=True)
    _bridge_iteration(tmp_path, 20, finished=True)
    _bridge_iteration(tmp_path, 30, finished=False)  # every rank's shards, no train_state.pt: a save cut short
    (tmp_path / "checkpoints" / "iter_0000040.partial").mkdir()  # not Bridge's name for an iteration
    assert [checkpoint.step for checkpoint in megatron_committed(tmp_path)] == [10, 20]
    newest = newest_committed(tmp_path, "megatron")
    assert newest is not None and newest.relative == "checkpoints/iter_0000020"


def test_a_nemo_checkpoint_counts_once_its_unfinished_marker_is_gone(tmp_path: Path) -> None:
    checkpoints = tmp_path / "nemo" / "run" / "checkpoints"
    done = checkpoints / "run--reduced_train_loss=2.10-step=99-consumed_samples=6400.0"
    done_last = checkpoints / "run--reduced_train_loss=2.10-step=99-consumed_samples=6400.0-last"
    saving = checkpoints / "run--reduced_train_loss=1.90-step=199-consumed_samples=12800.0"
    for path in (done, done_last, saving):
        path.mkdir(parents=True)
    # NeMo's ModelCheckpoint: rank 0 creates the marker before any rank writes, and removes it after all have.
    unfinished_marker(saving).touch()
    assert unfinished_marker(saving) == checkpoints / f"{saving.name}-unfinished"
    assert [c.path for c in lightning_committed(tmp_path)] == [done, done_last]
    newest = newest_committed(tmp_path)
    assert newest is not None and newest.path == done_last  # at one step, the -last copy NeMo resumes from
    unfinished_marker(saving).unlink()
    newest = newest_committed(tmp_path)
    assert newest is not None and newest.step == 199


def test_an_nxdt_checkpoint_follows_the_same_marker_rule(tmp_path: Path) -> None:
    checkpoints = tmp_path / "nxdt" / "checkpoints"
    older = checkpoints / "pythia--step=500-consumed_samples=128000.0.ckpt"
    newer = checkpoints / "pythia--step=1000-consumed_samples=256000.0.ckpt"
    for path in (older, newer):
        path.mkdir(parents=True)
    unfinished_marker(newer).touch()  # `.ckpt` is cut from the marker's name
    assert unfinished_marker(newer).name == "pythia--step=1000-consumed_samples=256000.0-unfinished"
    newest = newest_committed(tmp_path, "lightning")
    assert newest is not None and newest.path == older


def test_every_backend_names_a_checkpoint_layout_the_watcher_knows() -> None:
    for backend in BACKENDS.values():
        assert backend.checkpoint_layout == "dcp" or backend.checkpoint_layout in LAYOUTS, backend.name
    assert {backend.name: backend.checkpoint_layout for backend in BACKENDS.values()} == {
        "fsdp": "dcp",
        "nemo2": "lightning",
        "bridge": "megatron",
        "neuron": "lightning",
    }
