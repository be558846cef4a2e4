"""Checkpoint files moved through the page cache without being left in it.

Writing: the bytes go from the caller's memory (a tensor's storage, handed over by torch.save) to the file with
pwrite, no copy of ours. Every `WRITEBACK_BYTES` of file, the kernel is asked to start writing that window to the
device (sync_file_range with SYNC_FILE_RANGE_WRITE, which does not wait), so the disk works while the next tensors
are serialized and the fsync at close has little left to do. After that fsync the pages are clean and are dropped
(POSIX_FADV_DONTNEED): a checkpoint must not push the training job's own data out of the cache. Small writes (the
few-byte zip headers torch.save writes around each record) are gathered first, so they cost one system call a batch.

Reading: a file is a list of records (for DCP, one torch.save archive per tensor), each with a head that says
where its payload sits. The records, in file order, are split into a few runs of about equal size, and each run is
read front to back by a thread of its own, on a descriptor of its own (so each keeps its own read-ahead): a
record's head, then its payload straight into the destination memory (no bounce buffer, no alignment rules), then
the next record's head. The pages read stay in the cache: they are clean, so the kernel reclaims them at no cost
when the job needs the memory, and dropping them at once cost 0.15 s per 1.5 GB on the load's critical path.
Written pages are different: they would sit dirty, then displace the job's data as the most recently used,
checkpoint after checkpoint. While the caller is still planning its reads, `Prefetch` pulls the front of its
files into the cache, so the device is not idle meanwhile.

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
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import TracebackType

WRITEBACK_BYTES = 64 << 20
SMALL_WRITE_BYTES = 64 << 10  # writes below this are gathered into one buffer before they reach the file
READ_THREADS = 4
PIECE_BYTES = 16 << 20
PREFETCH_BYTES = 1 << 30  # at most this much of a checkpoint is pulled into the cache ahead of its reads
PREFETCH_CHUNK_BYTES = 64 << 20

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


@dataclass(frozen=True)
class Placement:
    """A record's payload starts `offset` bytes into the record and goes to `into` (as many bytes as it holds)."""

    offset: int
    into: memoryview


@dataclass(frozen=True)
class Record:
    """`length` bytes at `offset` in the file. `place` says where its payload sits and goes, given the record's
    first `head_bytes` (fewer if the record is shorter; nothing when `head_bytes` is 0), or None when the payload
    cannot be read straight into place. It may be called more than once for a record and must answer the same."""

    offset: int
    length: int
    place: Callable[[bytes], Placement | None]
    head_bytes: int = 0


def fixed(into: memoryview | bytearray) -> Callable[[bytes], Placement]:
    """`place` for a record that is all payload."""
    view = memoryview(into).cast("B")
    return lambda head: Placement(0, view)


class _Placements:
    """Each record's placement, found by whichever reader thread first needs it (a record cut between two threads'
    runs is needed by both) and then shared."""

    def __init__(self, path: str | os.PathLike, records: list[Record]) -> None:
        self.path, self.records = path, records
        self._known: dict[int, Placement | None] = {}
        self._lock = threading.Lock()

    def lookup(self, index: int) -> tuple[bool, Placement | None]:
        """(whether the record's placement is settled, the placement)."""
        with self._lock:
            return index in self._known, self._known.get(index)

    def settle(self, index: int, found: Placement | None) -> Placement | None:
        record = self.records[index]
        if found is not None and not 0 <= found.offset <= record.length - found.into.nbytes:
            raise ValueError(
                f"{self.path}: the payload of the record at byte {record.offset} ({found.into.nbytes} bytes from "
                f"byte {found.offset} of it) runs past its {record.length} bytes"
            )
        with self._lock:
            return self._known.setdefault(index, found)


def _pread_into(fd: int, path: str | os.PathLike, into: memoryview, offset: int) -> int:
    """Fill `into` from `offset`; ValueError naming the file if it ends first."""
    view = into
    while view:
        count = os.preadv(fd, [view], offset)
        if count == 0:
            raise ValueError(f"{path}: ends at byte {offset}, a record runs past it (truncated while reading?)")
        view, offset = view[count:], offset + count
    return into.nbytes


def _read_run(path: str | os.PathLike, run: list[tuple[int, int, int]], placements: _Placements) -> None:
    """One reader thread's pieces (record index, start, end within the record), in file order, on a descriptor of
    its own: the kernel keeps read-ahead state per open file, and threads interleaving on one descriptor would look
    like random access and lose it. A record's head is read when its first piece comes up, right before the bytes
    behind it, so it is part of the same sequential stream. (A separate pass over all the heads first costs its own
    latency, and the head pages it leaves cached break the read-ahead of the pass after it: measured 0.44 s against
    0.33 s for the same 1.5 GB.)"""
    fd = os.open(path, os.O_RDONLY)
    head_of = -1
    head = memoryview(bytearray())
    try:
        for index, start, end in run:
            record = placements.records[index]
            settled, placement = placements.lookup(index)
            if not settled:
                head_of, head = index, memoryview(bytearray(min(record.head_bytes, record.length)))
                if head:
                    _pread_into(fd, path, head, record.offset)
                placement = placements.settle(index, record.place(bytes(head)))
            if placement is None:
                continue  # left to the caller
            low = max(start, placement.offset)
            high = min(end, placement.offset + placement.into.nbytes)
            if low >= high:
                continue
            into = placement.into[low - placement.offset : high - placement.offset]
            if head_of == index and high <= head.nbytes:
                into[:] = head[low:high]  # a small payload came in with its head
            else:
                _pread_into(fd, path, into, record.offset + low)
    finally:
        os.close(fd)


def read_records(
    path: str | os.PathLike, records: list[Record], threads: int = READ_THREADS, piece_bytes: int = PIECE_BYTES
) -> list[bool]:
    """Read each record's payload straight into place; per record, whether it was (False: `place` said None).

    The records, in file order, are cut into pieces of at most `piece_bytes`, the pieces into `threads` runs of
    about equal bytes, and each thread reads its run front to back: the device gets several sequential streams at
    once, each with read-ahead of its own. ValueError naming the file if it is shorter than the records."""
    if piece_bytes <= 0:
        raise ValueError(f"piece_bytes: {piece_bytes} must be positive")
    order = sorted(range(len(records)), key=lambda index: records[index].offset)
    pieces = [
        (index, start, min(start + piece_bytes, records[index].length))
        for index in order
        for start in range(0, max(records[index].length, 1), piece_bytes)
    ]
    if not pieces:
        return []
    check_file_holds(path, os.stat(path).st_size, max(record.offset + record.length for record in records))
    total = sum(max(end - start, 1) for _, start, end in pieces)
    runs: list[list[tuple[int, int, int]]] = [[] for _ in range(max(1, threads))]
    done = 0
    for piece in pieces:
        runs[min(done * len(runs) // total, len(runs) - 1)].append(piece)
        done += max(piece[2] - piece[1], 1)
    placements = _Placements(path, records)
    with ThreadPoolExecutor(max_workers=len(runs), thread_name_prefix="checkpoint-reader") as pool:
        for future in [pool.submit(_read_run, path, run, placements) for run in runs if run]:
            future.result()
    return [placements.lookup(index)[1] is not None for index in range(len(records))]


class Prefetch:
    """Pull the front of some files into the page cache in a background thread until `stop()` (at most `limit`
    bytes): while a loader plans what to read (DCP's planning, the state-dict calls) the device is otherwise idle.

    The bytes go from the file to /dev/null with sendfile: the kernel reads them into the page cache with its usual
    read-ahead and copies them nowhere, and the thread holds no GIL while it waits. Everything here is a hint: any
    error ends the prefetch quietly (a filesystem without splice support, a file gone), and the reads that follow
    find whatever is cached."""

    def __init__(
        self, paths: Sequence[str | os.PathLike], limit: int = PREFETCH_BYTES, chunk: int = PREFETCH_CHUNK_BYTES
    ) -> None:
        self.paths, self.limit, self.chunk = paths, limit, chunk
        self.fetched = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="checkpoint-prefetch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        with contextlib.suppress(OSError):
            sink = os.open(os.devnull, os.O_WRONLY)
            try:
                for path in self.paths:
                    self._fetch(path, sink)
            finally:
                os.close(sink)

    def _fetch(self, path: str | os.PathLike, sink: int) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            offset = 0
            while self.fetched < self.limit and not self._stop.is_set():
                count = os.sendfile(sink, fd, offset, min(self.chunk, self.limit - self.fetched))
                if count == 0:
                    return
                offset += count
                self.fetched += count
        finally:
            os.close(fd)

    def stop(self) -> None:
        """Ask the prefetch to end; it does after the chunk in flight, whose pages the reads want anyway."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def wait(self) -> int:
        """Wait for the thread to end; the bytes it fetched."""
        self._thread.join()
        return self.fetched
