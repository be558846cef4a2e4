"""On-disk layout: ROOT/step-N/ holds one checkpoint; it counts only once ROOT/step-N/COMMITTED exists.

A save writes ROOT/step-N.tmp/, fsyncs its files and the directory, renames it to ROOT/step-N/, fsyncs ROOT,
then writes and fsyncs the marker. A crash at any point leaves either a .tmp directory or a step directory
without a marker; both are ignored by loading and removed by the next start.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

MARKER = "COMMITTED"
TMP_SUFFIX = ".tmp"
RNG_DIR = "rng"
TRAINER_STATE = "trainer_state.json"
_STEP_DIR = re.compile(r"^step-(\d+)$")
_TMP_DIR = re.compile(r"^step-(\d+)\.tmp$")


def step_dir(root: Path, step: int) -> Path:
    return root / f"step-{step}"


def tmp_dir(root: Path, step: int) -> Path:
    return root / f"step-{step}{TMP_SUFFIX}"


def complete_checkpoints(root: Path) -> list[tuple[int, Path]]:
    """(step, path) of every committed checkpoint, oldest first."""
    if not root.is_dir():
        return []
    found = []
    for entry in root.iterdir():
        match = _STEP_DIR.match(entry.name)
        if match and entry.is_dir() and (entry / MARKER).is_file():
            found.append((int(match.group(1)), entry))
    return sorted(found)


def latest_complete(root: Path) -> tuple[int, Path] | None:
    complete = complete_checkpoints(root)
    return complete[-1] if complete else None


def incomplete_entries(root: Path) -> list[Path]:
    """Leftovers of interrupted saves or deletions: step-N.tmp/ and step-N/ without a marker."""
    if not root.is_dir():
        return []
    leftovers = []
    for entry in root.iterdir():
        if not entry.is_dir():
            continue
        if _TMP_DIR.match(entry.name) or (_STEP_DIR.match(entry.name) and not (entry / MARKER).is_file()):
            leftovers.append(entry)
    return sorted(leftovers)


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    """Persist the directory entries themselves (new names, renames)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(path: Path) -> None:
    for directory, _, files in os.walk(path):
        for name in files:
            fsync_file(Path(directory) / name)
        fsync_dir(Path(directory))


def write_durably(path: Path, data: bytes) -> None:
    with path.open("wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())


def remove_checkpoint(path: Path) -> None:
    """Un-commit first (marker gone, durably), then delete: a crash mid-delete leaves an ignored leftover."""
    uncommit(path)
    shutil.rmtree(path, ignore_errors=True)


def uncommit(path: Path) -> None:
    """Remove the marker durably: from then on the checkpoint is ignored by loading and removed at the next start."""
    marker = path / MARKER
    if marker.exists():
        marker.unlink()
        fsync_dir(path)


def directory_bytes(path: Path) -> int:
    return sum((Path(d) / f).stat().st_size for d, _, files in os.walk(path) for f in files)
