import os
from pathlib import Path

from bench.page_cache import drop_from_page_cache
from tests.page_cache import resident_pages, skip_on_memory_filesystems


def _written(path: Path, size: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(os.urandom(size))  # through the page cache: the pages are resident and dirty
    return path


def test_a_written_file_leaves_the_page_cache_and_keeps_its_bytes(tmp_path: Path) -> None:
    skip_on_memory_filesystems(tmp_path)
    path = _written(tmp_path / "data.bin", 1 << 20)
    content = path.read_bytes()
    assert resident_pages(path) > 0  # written through the page cache, so there is something to drop
    drop_from_page_cache(path)
    # Dirty pages cannot be evicted; the drop writes them back first, so none may remain.
    assert resident_pages(path) == 0
    assert path.read_bytes() == content


def test_a_directory_drops_every_file_under_it(tmp_path: Path) -> None:
    skip_on_memory_filesystems(tmp_path)
    files = [_written(tmp_path / "a.bin", 256 << 10), _written(tmp_path / "sub" / "b.bin", 256 << 10)]
    assert all(resident_pages(file) > 0 for file in files)
    drop_from_page_cache(tmp_path)
    assert [resident_pages(file) for file in files] == [0, 0]
