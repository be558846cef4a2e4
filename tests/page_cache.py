"""Page-cache facts for the tests of code that writes back or drops cached pages (bench.page_cache,
training.checkpoint.file_io)."""

import ctypes
import mmap
from pathlib import Path

import numpy as np
import pytest

_LIBC = ctypes.CDLL(None, use_errno=True)


def resident_pages(path: Path) -> int:
    """Pages of `path` in the page cache: mincore(2) over a read-only mapping, which itself faults nothing in."""
    size = path.stat().st_size
    vector = (ctypes.c_ubyte * -(-size // mmap.PAGESIZE))()
    with path.open("rb") as file, mmap.mmap(file.fileno(), size, prot=mmap.PROT_READ) as mapping:
        view = np.frombuffer(mapping, dtype=np.uint8)
        status = _LIBC.mincore(ctypes.c_void_p(view.ctypes.data), ctypes.c_size_t(size), vector)
        del view  # the mapping cannot close while an array still points into it
    if status != 0:
        raise OSError(ctypes.get_errno(), "mincore")
    return sum(byte & 1 for byte in vector)


def skip_on_memory_filesystems(directory: Path) -> None:
    """tmpfs and ramfs hold files only in the page cache, so there is nothing to write back or drop there."""
    mounts = [line.split() for line in Path("/proc/mounts").read_text().splitlines()]
    resolved = directory.resolve()
    mount_point, fs_type = max(
        ((Path(fields[1]), fields[2]) for fields in mounts if resolved.is_relative_to(fields[1])),
        key=lambda mount: len(mount[0].parts),
    )
    if fs_type in ("tmpfs", "ramfs"):
        pytest.skip(f"{directory} is on {fs_type} ({mount_point}): files live only in memory, nothing to drop")
