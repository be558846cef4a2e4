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


def _written(path: Path, size: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(os.urandom(size))  # through the page cache: the pages are resident and dirty
    return path


def test_a_written_file_leaves_the_page_cache_and_keeps_its_bytes(tmp_path: Path) -> None:
    path = _written(tmp_path / "data.bin", 1 << 20)
    content = path.read_bytes()
    if resident_pages(path) == 0:
        pytest.skip(f"the filesystem of {tmp_path} keeps no page cache to look at")
    drop_from_page_cache(path)
    # Dirty pages cannot be evicted; the drop writes them back first, so none may remain.
    assert resident_pages(path) == 0
    assert path.read_bytes() == content


def test_a_directory_drops_every_file_under_it(tmp_path: Path) -> None:
    files = [_written(tmp_path / "a.bin", 256 << 10), _written(tmp_path / "sub" / "b.bin", 256 << 10)]
    if resident_pages(files[0]) == 0:
        pytest.skip(f"the filesystem of {tmp_path} keeps no page cache to look at")
    drop_from_page_cache(tmp_path)
    assert [resident_pages(file) for file in files] == [0, 0]
