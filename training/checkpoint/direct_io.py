"""Checkpoint files written and read with O_DIRECT through aligned buffers.

A checkpoint is written once and read rarely, so passing it through the page cache only costs: every byte is
copied into freshly allocated cache pages (on a VM each first touch of such a page is a fault on the host too),
those pages then have to be written back by fsync, and they push the training job's own data out of the cache.
With O_DIRECT the bytes go from an aligned buffer to the device. One buffer is filled while background threads
write the others (pwrite releases the GIL), so copying and writing overlap and the device has a few requests
queued at once.

Reading goes the same way round: aligned segments of the file are read by a few threads at once (the device
sees a queue of requests rather than one at a time) and copied straight into the tensors they belong to.

Filesystems without O_DIRECT (tmpfs, some FUSE mounts) get the same buffers through ordinary reads and writes.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import threading
from collections import defaultdict, deque
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType

ALIGNMENT = 4096  # O_DIRECT offsets, lengths and buffer addresses must be multiples of the device block
BUFFER_BYTES = 16 << 20
WRITE_BUFFERS = 4


READ_THREADS = 4


def open_direct(path: str | os.PathLike, flags: int) -> tuple[int, bool]:
    """(fd, direct): O_DIRECT where the filesystem accepts it, a plain descriptor otherwise."""
    direct = getattr(os, "O_DIRECT", 0)
    if direct:
        try:
            return os.open(path, flags | direct, 0o644), True
        except OSError as error:
            if error.errno != errno.EINVAL:
                raise
    return os.open(path, flags, 0o644), False


def _pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    while data:
        written = os.pwrite(fd, data, offset)
        data, offset = data[written:], offset + written


class DirectWriter:
    """`write(bytes)` appends; `tell()` is the logical size; `close()` pads, truncates to size and fsyncs."""

    def __init__(
        self, path: str | os.PathLike, sync: bool = True, buffer_bytes: int = BUFFER_BYTES, buffers: int = WRITE_BUFFERS
    ) -> None:
        if buffer_bytes % ALIGNMENT:
            raise ValueError(f"buffer_bytes: {buffer_bytes} must be a multiple of {ALIGNMENT}")
        if buffers < 2:
            raise ValueError(f"buffers: {buffers} must be at least 2 (one filled while another is written)")
        self.path = path
        self.sync = sync
        self.fd, self.direct = open_direct(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        # Anonymous mmaps are page aligned, as O_DIRECT needs.
        self._buffers = [mmap.mmap(-1, buffer_bytes) for _ in range(buffers)]
        self._views = [memoryview(buffer) for buffer in self._buffers]
        self._current = 0
        self._filled = 0  # bytes in the current buffer
        self._flushed = 0  # file offset where the current buffer starts
        # Up to buffers - 1 writes in flight: the device works on several requests at once (a virtio disk or a
        # Lustre client gains from the queue), while the next buffer is filled.
        self._pool = ThreadPoolExecutor(max_workers=buffers - 1, thread_name_prefix="checkpoint-writer")
        self._pending: deque[Future[None]] = deque()
        self._closed = False

    def tell(self) -> int:
        return self._flushed + self._filled

    def write(self, data: memoryview | bytes) -> int:
        view = memoryview(data).cast("B")
        size = len(view)
        capacity = len(self._views[0])
        while view:
            take = min(len(view), capacity - self._filled)
            self._views[self._current][self._filled : self._filled + take] = view[:take]
            self._filled += take
            view = view[take:]
            if self._filled == capacity:
                self._submit(self._filled)
        return size

    def flush(self) -> None:
        """File-object protocol (torch.save calls it per record): a no-op, the buffers reach the file at close."""

    def _submit(self, length: int) -> None:
        """Hand the current buffer to a writer thread and move to the next one, once its last write is done."""
        self._pending.append(
            self._pool.submit(_pwrite_all, self.fd, self._views[self._current][:length], self._flushed)
        )
        self._flushed += self._filled
        self._filled = 0
        self._current = (self._current + 1) % len(self._buffers)
        if len(self._pending) == len(self._buffers):  # the next buffer is the oldest one in flight
            self._pending.popleft().result()

    def _wait(self) -> None:
        while self._pending:
            self._pending.popleft().result()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            size = self.tell()
            if self._filled:
                tail = self._filled
                if self.direct:  # the last block is written whole, then the file is cut back to its size
                    padded = -(-tail // ALIGNMENT) * ALIGNMENT
                    self._views[self._current][tail:padded] = bytes(padded - tail)
                    tail = padded
                self._submit(tail)
            self._wait()
            os.ftruncate(self.fd, size)
            if self.sync:
                os.fsync(self.fd)
        finally:
            self._release()

    def abort(self) -> None:
        """Release everything after a failure; the partial file is the caller's to remove."""
        self._closed = True
        self._release()

    def _release(self) -> None:
        self._pool.shutdown(wait=True)  # writes still in flight finish before their buffers go away
        self._pending.clear()
        os.close(self.fd)
        for view in self._views:
            view.release()
        for buffer in self._buffers:
            # A failed write's traceback may still hold a slice of its buffer; the garbage collector frees it then.
            with contextlib.suppress(BufferError):
                buffer.close()

    def __enter__(self) -> DirectWriter:
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


def read_ranges(
    path: str | os.PathLike,
    ranges: list[tuple[int, memoryview]],
    threads: int = READ_THREADS,
    segment_bytes: int = BUFFER_BYTES,
) -> None:
    """Fill each (file offset, destination) pair from the file; ValueError naming the file if it is too short."""
    if segment_bytes % ALIGNMENT:
        raise ValueError(f"segment_bytes: {segment_bytes} must be a multiple of {ALIGNMENT}")
    destinations = [(offset, memoryview(into).cast("B")) for offset, into in ranges]
    needed: dict[int, list[tuple[int, memoryview]]] = defaultdict(list)  # segment -> ranges it overlaps
    for offset, into in destinations:
        if into.nbytes:
            for segment in range(offset // segment_bytes, (offset + into.nbytes - 1) // segment_bytes + 1):
                needed[segment].append((offset, into))
    if not needed:
        return
    fd, _ = open_direct(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        check_file_holds(path, size, max(offset + into.nbytes for offset, into in destinations))
        buffers: dict[int, mmap.mmap] = {}

        def read_segment(segment: int) -> None:
            buffer = buffers.setdefault(threading.get_ident(), mmap.mmap(-1, segment_bytes))
            view = memoryview(buffer)
            start = segment * segment_bytes
            got = 0
            while got < segment_bytes and start + got < size:  # O_DIRECT: whole aligned blocks, short at EOF
                count = os.preadv(fd, [view[got:]], start + got)
                if count == 0:
                    break
                got += count
            for offset, into in needed[segment]:
                first, last = max(offset, start), min(offset + into.nbytes, start + got)
                into[first - offset : last - offset] = view[first - start : last - start]
            view.release()

        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="checkpoint-reader") as pool:
            for future in [pool.submit(read_segment, segment) for segment in sorted(needed)]:
                future.result()
        for buffer in buffers.values():
            buffer.close()
    finally:
        os.close(fd)


def read_heads(
    path: str | os.PathLike, offsets: list[int], length: int, threads: int = 2 * READ_THREADS
) -> list[bytes]:
    """The first `length` bytes at each offset (fewer at the end of the file): aligned O_DIRECT reads of the
    blocks around them, several in flight at once (each is a small, latency-bound request), so looking at record
    headers neither reads ahead nor fills the page cache."""
    fd, direct = open_direct(path, os.O_RDONLY)
    size = os.fstat(fd).st_size
    span = -(-(length + ALIGNMENT) // ALIGNMENT) * ALIGNMENT
    buffers: dict[int, tuple[mmap.mmap, memoryview]] = {}
    lock = threading.Lock()

    def read_one(offset: int) -> bytes:
        with lock:
            if threading.get_ident() not in buffers:
                buffer = mmap.mmap(-1, span)
                buffers[threading.get_ident()] = (buffer, memoryview(buffer))
            view = buffers[threading.get_ident()][1]
        start = offset - offset % ALIGNMENT if direct else offset
        got = 0
        while got < span and start + got < size:  # O_DIRECT: whole aligned blocks, short only at the end
            count = os.preadv(fd, [view[got:]], start + got)
            if count == 0:
                break
            got += count
        skip = offset - start
        return bytes(view[skip : min(got, skip + length)])

    try:
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="checkpoint-heads") as pool:
            return list(pool.map(read_one, offsets))
    finally:
        os.close(fd)
        for buffer, view in buffers.values():
            view.release()
            buffer.close()
