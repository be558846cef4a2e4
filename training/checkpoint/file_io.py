"""Checkpoint files moved through the page cache without being left in it.

Writing: the bytes go from the caller's memory (a tensor's storage, handed over by torch.save) to the file with
pwrite, no copy of ours. Every `WRITEBACK_BYTES` of file, the kernel is asked to start writing that window to the
device (sync_file_range with SYNC_FILE_RANGE_WRITE, which does not wait), so the disk works while the next tensors
are serialized and the fsync at close has little left to do. After that fsync the pages are clean and are dropped
(POSIX_FADV_DONTNEED): a checkpoint must not push the training job's own data out of the cache. Small writes (the
few-byte zip headers torch.save writes around each record) are gathered first, so they cost one system call a batch.

Reading: the ranges the caller wants, in file order, are split into a few runs of about equal size, and each run
is read front to back by a thread of its own, on a descriptor of its own (so each keeps its own read-ahead),
straight into the destination memory: no bounce buffer, no alignment rules. The pages read stay in the cache:
they are clean, so the kernel reclaims them at no cost when the job needs the memory, and dropping them at once
cost 0.15 s per 1.5 GB on the load's critical path. Written pages are different: they would sit dirty, then
displace the job's data as the most recently used, checkpoint after checkpoint.

Why not O_DIRECT (what this module used before): measured on the benchmark VM, O_DIRECT writes from four 16 MiB
buffers took 3.6-3.9 s for 1.5 GB where a plain write and fsync took 2.6-2.8 s and this writer 2.0-2.1 s, and
O_DIRECT reads through aligned bounce buffers on 4 threads loaded a checkpoint in 0.95-1.65 s where these reads
take 0.55-0.75 s (bench/checkpoint.py, docs/benchmarks.md).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType

WRITEBACK_BYTES = 64 << 20
SMALL_WRITE_BYTES = 64 << 10  # writes below this are gathered into one buffer before they reach the file
READ_THREADS = 4
PIECE_BYTES = 16 << 20

_SYNC_FILE_RANGE_WRITE = 2  # <linux/fs.h>: start writeback of the range's dirty pages, do not wait for it


def _find_sync_file_range() -> Callable[[int, int, int, int], int] | None:
    """libc's sync_file_range (Linux); None elsewhere, where the fsync at close does all the writing back."""
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (AttributeError, OSError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


_sync_file_range = _find_sync_file_range()


def start_writeback(fd: int, offset: int, length: int) -> None:
    """A hint: start writing the range back now. Errors are the fsync's to report, so a refusal is ignored."""
    if _sync_file_range is not None:
        _sync_file_range(fd, offset, length, _SYNC_FILE_RANGE_WRITE)


def drop_cached(fd: int) -> None:
    """Drop the file's clean pages from the page cache (dirty ones stay until written back)."""
    with contextlib.suppress(OSError, AttributeError):  # a hint; filesystems and platforms may refuse it
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)


def open_for_writing(path: str | os.PathLike) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)


def _pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    while data:
        written = os.pwrite(fd, data, offset)
        data, offset = data[written:], offset + written


class StreamingWriter:
    """`write(bytes)` appends; `tell()` is the size so far; `close()` writes what is gathered, fsyncs (when `sync`)
    and drops the file from the page cache."""

    def __init__(self, path: str | os.PathLike, sync: bool = True, writeback_bytes: int = WRITEBACK_BYTES) -> None:
        if writeback_bytes <= 0:
            raise ValueError(f"writeback_bytes: {writeback_bytes} must be positive")
        self.path = path
        self.sync = sync
        self.writeback_bytes = writeback_bytes
        self.fd = open_for_writing(path)
        self._written = 0  # bytes in the file
        self._writeback_from = 0  # writeback has been started for every window before this offset
        self._gathered = bytearray()
        self._closed = False

    def tell(self) -> int:
        return self._written + len(self._gathered)

    def write(self, data: memoryview | bytes) -> int:
        view = memoryview(data).cast("B")
        size = view.nbytes
        if size < SMALL_WRITE_BYTES:
            self._gathered += view
            if len(self._gathered) >= SMALL_WRITE_BYTES:
                self._write_gathered()
        else:
            self._write_gathered()
            self._write(view)
        return size

    def flush(self) -> None:
        """File-object protocol (torch.save calls it per record): a no-op, gathered bytes are written in batches."""

    def _write_gathered(self) -> None:
        if self._gathered:
            gathered, self._gathered = self._gathered, bytearray()
            self._write(memoryview(gathered))

    def _write(self, view: memoryview) -> None:
        _pwrite_all(self.fd, view, self._written)
        self._written += view.nbytes
        while self._written - self._writeback_from >= self.writeback_bytes:
            start_writeback(self.fd, self._writeback_from, self.writeback_bytes)
            self._writeback_from += self.writeback_bytes

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._write_gathered()
            if self.sync:
                os.fsync(self.fd)
                drop_cached(self.fd)  # clean after the fsync; without it the pages wait for the kernel's writeback
        finally:
            os.close(self.fd)

    def abort(self) -> None:
        """Close after a failure; the partial file is the caller's to remove."""
        if not self._closed:
            self._closed = True
            os.close(self.fd)

    def __enter__(self) -> StreamingWriter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if kind is None:
            self.close()
        else:
            self.abort()


def check_file_holds(path: str | os.PathLike, size: int, end: int) -> None:
    if end > size:
        raise ValueError(f"{path}: holds {size} bytes, records run to byte {end} (truncated?)")


def _read_share(path: str | os.PathLike, share: list[tuple[int, memoryview]]) -> None:
    """One reader thread's pieces, in file order, on a descriptor of its own: the kernel keeps read-ahead state per
    open file, and threads interleaving on one descriptor would look like random access and lose it."""
    fd = os.open(path, os.O_RDONLY)
    try:
        for offset, into in share:
            while into:
                count = os.preadv(fd, [into], offset)
                if count == 0:
                    raise ValueError(f"{path}: ends at byte {offset}, a record runs past it (truncated while reading?)")
                into, offset = into[count:], offset + count
    finally:
        os.close(fd)


def read_ranges(
    path: str | os.PathLike,
    ranges: list[tuple[int, memoryview]],
    threads: int = READ_THREADS,
    piece_bytes: int = PIECE_BYTES,
) -> None:
    """Fill each (file offset, destination) pair from the file; ValueError naming the file if it is too short.

    The pieces, in file order, are cut into `threads` runs of about equal bytes, and each thread reads its run
    front to back: the device gets several sequential streams at once, each with read-ahead of its own."""
    if piece_bytes <= 0:
        raise ValueError(f"piece_bytes: {piece_bytes} must be positive")
    pieces: list[tuple[int, memoryview]] = []
    for offset, into in ranges:
        view = memoryview(into).cast("B")
        for start in range(0, view.nbytes, piece_bytes):
            pieces.append((offset + start, view[start : start + piece_bytes]))
    if not pieces:
        return
    pieces.sort(key=lambda piece: piece[0])
    check_file_holds(path, os.stat(path).st_size, max(offset + view.nbytes for offset, view in pieces))
    total = sum(view.nbytes for _, view in pieces)
    shares: list[list[tuple[int, memoryview]]] = [[] for _ in range(max(1, threads))]
    done = 0
    for piece in pieces:
        shares[min(done * len(shares) // total, len(shares) - 1)].append(piece)
        done += piece[1].nbytes
    with ThreadPoolExecutor(max_workers=len(shares), thread_name_prefix="checkpoint-reader") as pool:
        for future in [pool.submit(_read_share, path, share) for share in shares if share]:
            future.result()


def read_heads(
    path: str | os.PathLike, offsets: list[int], length: int, threads: int = 2 * READ_THREADS
) -> list[bytes]:
    """The first `length` bytes at each offset (fewer at the end of the file). Each is a small, latency-bound
    request, so several are in flight at once, and read-ahead is off for them (POSIX_FADV_RANDOM): looking at record
    headers must not read the tensors behind them."""
    fd = os.open(path, os.O_RDONLY)
    with contextlib.suppress(OSError, AttributeError):
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
    local = threading.local()

    def read_one(offset: int) -> bytes:
        if not hasattr(local, "buffer"):
            local.buffer = bytearray(length)
        view = memoryview(local.buffer)
        got = 0
        while got < length:
            count = os.preadv(fd, [view[got:]], offset + got)
            if count == 0:
                break
            got += count
        return bytes(view[:got])

    try:
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="checkpoint-heads") as pool:
            return list(pool.map(read_one, offsets))
    finally:
        os.close(fd)
