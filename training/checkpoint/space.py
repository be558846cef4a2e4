"""Free-space check before each save: refuse (and stop the job) rather than fail half-way through a write."""

from __future__ import annotations

import shutil
from pathlib import Path

from training.checkpoint.errors import CheckpointSpaceError
from training.checkpoint.layout import directory_bytes, latest_complete

# fp32 weights plus AdamW's two fp32 moments; the master copy is the weight itself under FSDP2 mixed precision.
CHECKPOINT_BYTES_PER_PARAM = 12
_GIB = float(1 << 30)


def estimate_checkpoint_bytes(root: Path, param_count: int) -> tuple[int, str]:
    """(bytes, how it was estimated): the last complete checkpoint's size, else 12 bytes per parameter."""
    latest = latest_complete(root)
    if latest is not None:
        return directory_bytes(latest[1]), f"size of {latest[1].name}"
    return param_count * CHECKPOINT_BYTES_PER_PARAM, f"{CHECKPOINT_BYTES_PER_PARAM} bytes x {param_count:,} parameters"


def check_free_space(root: Path, param_count: int, margin: float) -> None:
    if margin <= 0:
        return
    needed, basis = estimate_checkpoint_bytes(root, param_count)
    free = shutil.disk_usage(root).free
    if free < margin * needed:
        raise CheckpointSpaceError(
            f"checkpoint.dir: {str(root)!r} has {free / _GIB:.3f} GiB free, the next checkpoint needs about "
            f"{margin * needed / _GIB:.3f} GiB ({basis}, x{margin} margin); free space, lower checkpoint.keep_last "
            f"or point checkpoint.dir elsewhere"
        )


def out_of_space_hint(root: Path, param_count: int) -> str:
    """After a failed write: say so when the filesystem cannot hold another checkpoint. Writers often hide the
    ENOSPC behind their own error (torch.save reports only a short zip record), so look at the disk itself."""
    try:
        free = shutil.disk_usage(root).free
    except OSError:
        return ""
    needed, _ = estimate_checkpoint_bytes(root, param_count)
    if free >= needed:
        return ""
    return f" ([Errno 28] No space left on device: {free / (1 << 20):.1f} MiB free on the checkpoint filesystem)"
