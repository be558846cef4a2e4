"""Where the frameworks we do not write (Megatron Bridge, NeMo 2, NxDT) keep their checkpoints, and when one is
committed: the one rule that `llm-follow` (which checkpoint a run ended with) and the replica watcher (which one to
copy to S3, training/checkpoint/framework_replica.py) both read. Torch-free: the head node reads it too.

Each rule is the framework's own, read from its code:

- `megatron` (Megatron Bridge 0.6, megatron/bridge/training/checkpointing.py `save_checkpoint`): every rank writes
  its shards into RUN_DIR/checkpoints/iter_NNNNNNN/; once all of them have (after a barrier, or in the finalize step
  of an async save), rank 0 writes the iteration's `train_state.pt`, copies it to `latest_train_state.pt`, writes the
  Megatron-LM tracker `latest_checkpointed_iteration.txt`, then `run_config.yaml` (and tokenizer files). The loader
  reads the iteration from `latest_train_state.pt`, else from the tracker (`checkpoint_exists` accepts either).
  Committed: `train_state.pt` is there (a directory without it is an unfinished save).
- `lightning` (NeMo 2.4's ModelCheckpoint, nemo/lightning/pytorch/callbacks/model_checkpoint.py, and NxDT's
  exp_manager built on it): before a save, rank 0 creates the marker file `<checkpoint>-unfinished` beside the
  checkpoint (`.ckpt` and `-EMA` cut from the name) and all ranks wait for it; the marker is removed only after every
  rank finished (or in the async save's finalize). Checkpoints are RUN_DIR/{nemo,nxdt}/.../checkpoints/<name with
  step=N>/; NeMo's resume takes the `*last` one. Committed: the directory exists and its marker does not.

A rule says nothing about files a framework still writes after its commit point (Bridge's run_config.yaml follows
train_state.pt); the watcher waits until the checkpoint's files stop changing before it copies one while training
runs (framework_replica.py).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from training.checkpoint.layout import fsync_dir, write_durably

MEGATRON_CHECKPOINTS = "checkpoints"  # RUN_DIR/checkpoints: launch/bridge.py's checkpoint.save and .load
MEGATRON_TRAIN_STATE = "train_state.pt"
MEGATRON_LATEST_TRAIN_STATE = "latest_train_state.pt"
MEGATRON_TRACKER = "latest_checkpointed_iteration.txt"
_MEGATRON_ITER = re.compile(r"^iter_(\d+)$")

LIGHTNING_DIRS = ("nemo", "nxdt")  # RUN_DIR/nemo (launch/nemo.py's log_dir), RUN_DIR/nxdt (explicit_log_dir)
UNFINISHED_SUFFIX = "-unfinished"
_LIGHTNING_STEP = re.compile(r"step=(\d+)")


@dataclass(frozen=True)
class FrameworkCheckpoint:
    layout: str
    step: int
    path: Path  # the checkpoint's directory
    run_dir: Path

    @property
    def relative(self) -> str:
        return self.path.relative_to(self.run_dir).as_posix()


def megatron_committed(run_dir: Path) -> list[FrameworkCheckpoint]:
    root = run_dir / MEGATRON_CHECKPOINTS
    found = [
        FrameworkCheckpoint("megatron", int(match.group(1)), path, run_dir)
        for path in (root.iterdir() if root.is_dir() else ())
        if (match := _MEGATRON_ITER.match(path.name)) and (path / MEGATRON_TRAIN_STATE).is_file()
    ]
    return sorted(found, key=lambda checkpoint: checkpoint.step)


def megatron_after_restore(checkpoint: FrameworkCheckpoint) -> None:
    """Name the restored iteration as the latest, as rank 0 does after a save: both trackers the loader reads."""
    root = checkpoint.path.parent
    for name, data in (
        (MEGATRON_LATEST_TRAIN_STATE, (checkpoint.path / MEGATRON_TRAIN_STATE).read_bytes()),
        (MEGATRON_TRACKER, str(checkpoint.step).encode()),
    ):
        staged = root / f".{name}.restoring"
        write_durably(staged, data)
        os.replace(staged, root / name)  # a crash leaves the old tracker or the new one, never half of one
    fsync_dir(root)


def unfinished_marker(checkpoint: Path) -> Path:
    """NeMo's ModelCheckpoint.format_checkpoint_unfinished_marker_path."""
    return Path(str(checkpoint).removesuffix(".ckpt").removesuffix("-EMA") + UNFINISHED_SUFFIX)


def lightning_committed(run_dir: Path) -> list[FrameworkCheckpoint]:
    found = []
    for base in LIGHTNING_DIRS:
        for path in (run_dir / base).glob("**/checkpoints/*"):
            match = _LIGHTNING_STEP.search(path.name)
            if (
                match
                and path.is_dir()
                and not path.name.startswith(".")  # a restore's staging directory
                and not path.name.endswith((".partial", UNFINISHED_SUFFIX))
                and not unfinished_marker(path).exists()
            ):
                found.append(FrameworkCheckpoint("lightning", int(match.group(1)), path, run_dir))
    # At one step NeMo saves the top-k checkpoint and its `-last` copy: the name breaks the tie towards `-last`,
    # the one NeMo's resume reads.
    return sorted(found, key=lambda checkpoint: (checkpoint.step, checkpoint.path.name))


def lightning_after_restore(checkpoint: FrameworkCheckpoint) -> None:
    """Nothing to name: NeMo and NxDT find their checkpoints by listing the directory."""


@dataclass(frozen=True)
class CheckpointLayout:
    name: str
    framework: str  # in words, for messages
    committed: Callable[[Path], list[FrameworkCheckpoint]]  # oldest first
    after_restore: Callable[[FrameworkCheckpoint], None]


# slurm.backends.TrainingBackend.checkpoint_layout names one of these (or "dcp", our trainer's, checkpoint/layout.py).
LAYOUTS: dict[str, CheckpointLayout] = {
    layout.name: layout
    for layout in (
        CheckpointLayout("megatron", "Megatron Bridge", megatron_committed, megatron_after_restore),
        CheckpointLayout("lightning", "NeMo 2 / NxDT", lightning_committed, lightning_after_restore),
    )
}


def newest_committed(run_dir: Path, layout: str | None = None) -> FrameworkCheckpoint | None:
    """The newest committed checkpoint of `layout` (every framework layout when None) under `run_dir`."""
    layouts = [LAYOUTS[layout]] if layout is not None else list(LAYOUTS.values())
    found = [checkpoint for each in layouts for checkpoint in each.committed(run_dir)]
    return max(found, key=lambda checkpoint: (checkpoint.step, checkpoint.path.name)) if found else None


def remove_leftover(path: Path) -> None:
    """An uncommitted directory where a restored checkpoint goes (a crash mid-save of the same step)."""
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
