import ctypes
import mmap
import os
from pathlib import Path

import numpy as np
import pytest

from bench.page_cache import drop_from_page_cache

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


def _skip_on_memory_filesystems(directory: Path) -> None:
    """tmpfs and ramfs hold files only in the page cache, so there is nothing to write back or drop there."""
    mounts = [line.split() for line in Path("/proc/mounts").read_text().splitlines()]
    resolved = directory.resolve()
    mount_point, fs_type = max(
        ((Path(fields[1]), fields[2]) for fields in mounts if resolved.is_relative_to(fields[1])),
        key=lambda mount: len(mount[0].parts),
    )
    if fs_type in ("tmpfs", "ramfs"):
        pytest.skip(f"{directory} is on {fs_type} ({mount_point}): files live only in memory, nothing to drop")


def _written(path: Path, size: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(os.urandom(size))  # through the page cache: the pages are resident and dirty
    return path


def test_a_written_file_leaves_the_page_cache_and_keeps_its_bytes(tmp_path: Path) -> None:
    _skip_on_memory_filesystems(tmp_path)
    path = _written(tmp_path / "data.bin", 1 << 20)
    content = path.read_bytes()
    assert resident_pages(path) > 0  # written through the page cache, so there is something to drop
    drop_from_page_cache(path)
    # Dirty pages cannot be evicted; the drop writes them back first, so none may remain.
    assert resident_pages(path) == 0
    assert path.read_bytes() == content


def test_a_directory_drops_every_file_under_it(tmp_path: Path) -> None:
    _skip_on_memory_filesystems(tmp_path)
    files = [_written(tmp_path / "a.bin", 256 << 10), _written(tmp_path / "sub" / "b.bin", 256 << 10)]
    assert all(resident_pages(file) > 0 for file in files)
    drop_from_page_cache(tmp_path)
    assert [resident_pages(file) for file in files] == [0, 0]
