"""Put files in a known page-cache state before timing them: on disk and out of memory."""

from __future__ import annotations

import os
from pathlib import Path


def drop_from_page_cache(path: Path) -> None:
    """Write a file's dirty pages back, then evict its pages, so the next read comes from the disk (a directory:
    every file under it); other files are left alone. Without the write-back, the kernel would write the pages
    later, during whatever is timed then, and could not evict them now."""
    files = [path] if path.is_file() else [Path(d) / f for d, _, names in os.walk(path) for f in names]
    for file in files:
        descriptor = os.open(file, os.O_RDONLY)
        try:
            os.fsync(descriptor)
            os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(descriptor)
