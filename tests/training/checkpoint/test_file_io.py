import errno
import mmap
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bench.page_cache import drop_from_page_cache
from tests.page_cache import resident_pages, skip_on_memory_filesystems
from training.checkpoint import file_io
from training.checkpoint.file_io import (
    SMALL_WRITE_BYTES,
    Placement,
    Prefetch,
    Record,
    StreamingWriter,
    fixed,
    read_records,
)

WINDOW = 8192  # a small writeback window, so the tests cross many


def _random_bytes(seed: int, size: int) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8).tobytes()


def _is_open_on(fd: int, path: Path) -> bool:
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except OSError:
        return False


def _written(path: Path, data: bytes) -> None:
    with StreamingWriter(path, writeback_bytes=WINDOW) as writer:
        writer.write(data)


@pytest.mark.parametrize(
    "sizes",
    [
        [0, 1, 4095, 4097, 20000],
        [1, 0, SMALL_WRITE_BYTES - 1, 1, SMALL_WRITE_BYTES, SMALL_WRITE_BYTES + 1, 0, 3],  # around the gathering
        [WINDOW, WINDOW, 2 * WINDOW],  # ends exactly on a writeback window
        [0],
        [],
    ],
    ids=["awkward", "around-the-gathering", "windows", "one-empty", "nothing"],
)
def test_writes_of_any_size_come_back_exactly(tmp_path: Path, sizes: list[int]) -> None:
    path = tmp_path / "data"
    chunks = [_random_bytes(seed, size) for seed, size in enumerate(sizes)]
    with StreamingWriter(path, writeback_bytes=WINDOW) as writer:
        assert writer.tell() == 0
        total = 0
        for chunk in chunks:
            assert writer.write(chunk) == len(chunk)
            total += len(chunk)
            assert writer.tell() == total
    assert writer.tell() == sum(sizes)
    assert path.stat().st_size == sum(sizes)
    assert path.read_bytes() == b"".join(chunks)
    assert not _is_open_on(writer.fd, path)


def test_small_writes_are_gathered_into_few_system_calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = file_io._pwrite_all

    def counting(fd: int, data: memoryview, offset: int) -> None:
        calls.append(data.nbytes)
        real(fd, data, offset)

    monkeypatch.setattr(file_io, "_pwrite_all", counting)
    path = tmp_path / "data"
    pieces = [_random_bytes(seed, 1 + seed % 60) for seed in range(5000)]  # torch.save's headers come like this
    big = _random_bytes(9, 3 * SMALL_WRITE_BYTES)
    with StreamingWriter(path) as writer:
        for piece in pieces[:2500]:
            writer.write(piece)
        writer.write(big)  # what was gathered goes first, then this one straight from the caller's memory
        for piece in pieces[2500:]:
            writer.write(piece)
    assert path.read_bytes() == b"".join(pieces[:2500]) + big + b"".join(pieces[2500:])
    assert len(calls) <= 6 and big.__len__() in calls


def test_writeback_is_started_for_every_full_window_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[tuple[int, int]] = []
    monkeypatch.setattr(file_io, "start_writeback", lambda fd, offset, length: started.append((offset, length)))
    path = tmp_path / "data"
    with StreamingWriter(path, writeback_bytes=WINDOW) as writer:
        writer.write(bytes(SMALL_WRITE_BYTES + 5 * WINDOW + 100))
        assert started == [(i * WINDOW, WINDOW) for i in range((SMALL_WRITE_BYTES + 5 * WINDOW + 100) // WINDOW)]
        writer.write(b"x" * 10)  # gathered: no window completes until it reaches the file
    assert started[-1][0] + WINDOW <= path.stat().st_size


def test_the_real_sync_file_range_is_found_and_accepts_a_range(tmp_path: Path) -> None:
    # Linux and glibc: the hint must really reach the kernel, not be skipped for want of the symbol.
    assert file_io._sync_file_range is not None
    fd = os.open(tmp_path / "data", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(fd, bytes(3 * 4096))
        assert file_io._sync_file_range(fd, 0, 3 * 4096, file_io._SYNC_FILE_RANGE_WRITE) == 0
    finally:
        os.close(fd)


def test_a_written_file_leaves_the_page_cache_at_close(tmp_path: Path) -> None:
    skip_on_memory_filesystems(tmp_path)
    path = tmp_path / "data"
    with StreamingWriter(path, writeback_bytes=WINDOW) as writer:
        writer.write(_random_bytes(1, 64 * 4096))
        assert resident_pages(path) > 0  # written through the cache
    assert resident_pages(path) == 0


def test_one_large_typed_memoryview(tmp_path: Path) -> None:
    path = tmp_path / "data"
    words = np.random.default_rng(1).integers(0, 2**31, 100_001, dtype=np.int32)
    with StreamingWriter(path, sync=False, writeback_bytes=WINDOW) as writer:
        writer.write(b"head")
        assert writer.write(memoryview(words)) == words.nbytes
        assert writer.tell() == 4 + words.nbytes
    assert path.read_bytes() == b"head" + words.tobytes()


def test_close_twice_is_harmless_and_overwrites_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "data"
    path.write_bytes(b"x" * 50_000)
    writer = StreamingWriter(path)
    writer.write(b"short")
    writer.close()
    writer.close()
    assert path.read_bytes() == b"short"


def test_a_writeback_window_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^writeback_bytes: 0 must be positive$"):
        StreamingWriter(tmp_path / "data", writeback_bytes=0)
    assert not (tmp_path / "data").exists()


def _failing_write(*args: Any, **kwargs: Any) -> None:
    raise OSError(errno.EIO, os.strerror(errno.EIO))


def test_a_failed_write_surfaces_from_write_and_closes_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_io, "_pwrite_all", _failing_write)
    path = tmp_path / "data"
    with pytest.raises(OSError) as error, StreamingWriter(path) as writer:
        assert _is_open_on(writer.fd, path)
        writer.write(bytes(SMALL_WRITE_BYTES))  # large enough to go to the file at once
    assert type(error.value) is OSError
    assert error.value.errno == errno.EIO
    assert not _is_open_on(writer.fd, path)


def test_a_failed_last_write_surfaces_from_close_and_closes_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_io, "_pwrite_all", _failing_write)
    path = tmp_path / "data"
    writer = StreamingWriter(path)
    writer.write(b"only the tail")  # gathered: it reaches the file at close
    with pytest.raises(OSError) as error:
        writer.close()
    assert error.value.errno == errno.EIO
    assert not _is_open_on(writer.fd, path)
    writer.close()  # already closed: nothing more to do, nothing raised


def test_a_failed_fsync_surfaces_from_close(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(file_io.os, "fsync", _failing_write)
    path = tmp_path / "data"
    writer = StreamingWriter(path)
    writer.write(bytes(SMALL_WRITE_BYTES))
    with pytest.raises(OSError, match="Input/output error"):
        writer.close()
    assert not _is_open_on(writer.fd, path)


def test_an_error_inside_the_with_block_aborts_and_closes_the_file(tmp_path: Path) -> None:
    path = tmp_path / "data"
    with pytest.raises(KeyError), StreamingWriter(path) as writer:
        writer.write(bytes(10))
        raise KeyError("caller failed")
    assert not _is_open_on(writer.fd, path)


PIECE = 3 * 4096 + 17  # pieces of an odd size, so the split falls anywhere
HEAD = 64


def _random_ranges(rng: np.random.Generator, size: int) -> list[tuple[int, int]]:
    ranges = [(0, size), (size, 0), (0, 0), (size - 1, 1), (size - 3 * PIECE - 5, 3 * PIECE + 5)]
    for _ in range(60):
        start = int(rng.integers(0, size))
        length = int(rng.integers(0, min(size - start, PIECE) + 1))
        ranges.append((start, length))
    for _ in range(20):  # across many pieces
        start = int(rng.integers(0, size - 6 * PIECE))
        ranges.append((start, int(rng.integers(4 * PIECE, size - start + 1))))
    return [ranges[i] for i in rng.permutation(len(ranges))]


def _fixed_records(ranges: list[tuple[int, int]]) -> tuple[list[Record], list[memoryview]]:
    destinations = [memoryview(bytearray(length)) for _, length in ranges]
    records = [Record(start, len(into), fixed(into)) for (start, _), into in zip(ranges, destinations, strict=True)]
    return records, destinations


@pytest.mark.parametrize("threads", [1, 4])
def test_records_of_payload_alone_fill_every_destination(tmp_path: Path, threads: int) -> None:
    path = tmp_path / "data"
    size = 25 * PIECE + 1234
    data = _random_bytes(7, size)
    _written(path, data)
    ranges = _random_ranges(np.random.default_rng(1234), size)
    records, destinations = _fixed_records(ranges)
    assert read_records(path, records, threads=threads, piece_bytes=PIECE) == [True] * len(records)
    for (start, length), into in zip(ranges, destinations, strict=True):
        assert into.tobytes() == data[start : start + length], (start, length)


def _framed(payload: bytes, padding: int) -> bytes:
    """A record of the tests' own framing: the padding length (4 bytes), padding, payload, a tail of 9 bytes."""
    return len(payload).to_bytes(4, "little") + padding.to_bytes(4, "little") + b"p" * padding + payload + b"t" * 9


def _framed_place(into: memoryview, calls: list[int], index: int) -> Any:
    def place(head: bytes) -> Placement | None:
        calls.append(index)
        length, padding = int.from_bytes(head[0:4], "little"), int.from_bytes(head[4:8], "little")
        return Placement(8 + padding, into) if length == into.nbytes else None

    return place


@pytest.mark.parametrize("threads", [1, 3, 8])
def test_each_record_is_placed_from_its_own_head_and_read_into_place(tmp_path: Path, threads: int) -> None:
    rng = np.random.default_rng(5)
    payloads = [_random_bytes(seed, int(size)) for seed, size in enumerate(rng.integers(0, 6 * PIECE, 40))]
    payloads += [b"", b"x", _random_bytes(99, HEAD - 20)]  # empty, tiny, and wholly inside the head read
    paddings = [int(p) for p in rng.integers(0, HEAD - 8, len(payloads))]
    records_bytes = [_framed(payload, padding) for payload, padding in zip(payloads, paddings, strict=True)]
    path = tmp_path / "data"
    _written(path, b"lead" + b"".join(records_bytes))
    offsets = np.cumsum([4] + [len(record) for record in records_bytes])[:-1]
    destinations = [memoryview(bytearray(len(payload))) for payload in payloads]
    destinations[7] = memoryview(bytearray(len(payloads[7]) + 1))  # a record the caller cannot take as it is
    calls: list[int] = []
    records = [
        Record(int(offset), len(record), _framed_place(into, calls, index), head_bytes=HEAD)
        for index, (offset, record, into) in enumerate(zip(offsets, records_bytes, destinations, strict=True))
    ]
    shuffled = [records[i] for i in rng.permutation(len(records))]  # any order: read in file order
    placed = read_records(path, shuffled, threads=threads, piece_bytes=PIECE)
    by_offset = dict(zip((record.offset for record in shuffled), placed, strict=True))
    for index, (record, payload, into) in enumerate(zip(records, payloads, destinations, strict=True)):
        if index == 7:
            assert not by_offset[record.offset] and into.tobytes() == bytes(len(payload) + 1)  # left alone
        else:
            assert by_offset[record.offset] and into.tobytes() == payload, index
    # A record cut between two threads' runs may be placed by both; no record is placed more than twice per thread.
    assert set(calls) == set(range(len(records))) and len(calls) <= len(records) + threads


def test_a_payload_inside_the_head_takes_no_second_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "data"
    record = _framed(b"tiny payload", 3)
    _written(path, record)
    reads: list[int] = []
    real = file_io.os.preadv

    def counting(fd: int, buffers: list[memoryview], offset: int) -> int:
        reads.append(offset)
        return real(fd, buffers, offset)

    monkeypatch.setattr(file_io.os, "preadv", counting)
    into = memoryview(bytearray(12))
    assert read_records(path, [Record(0, len(record), _framed_place(into, [], 0), head_bytes=HEAD)]) == [True]
    assert into.tobytes() == b"tiny payload" and reads == [0]


def test_a_placement_past_the_record_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "data"
    _written(path, bytes(1000))
    record = Record(100, 50, lambda head: Placement(10, memoryview(bytearray(41))), head_bytes=16)
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}: the payload of the record at byte 100 \(41 bytes"):
        read_records(path, [record])


def test_reading_nothing_does_not_open_the_file(tmp_path: Path) -> None:
    assert read_records(tmp_path / "absent", []) == []


def test_records_past_the_end_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "data"
    _written(path, bytes(10_000))
    records, _ = _fixed_records([(0, 100), (9_000, 1_001)])
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}: holds 10000 bytes, records run to byte 10001"):
        read_records(path, records, piece_bytes=PIECE)
    records, _ = _fixed_records([(9_000, 1_000)])
    assert read_records(path, records, piece_bytes=PIECE) == [True]  # up to the end exactly


def test_a_file_cut_short_while_reading_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "data"
    _written(path, bytes(10_000))
    monkeypatch.setattr(file_io.os, "preadv", lambda fd, buffers, offset: 0)  # end of file before the size said
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}: ends at byte 0, a record runs past it"):
        read_records(path, _fixed_records([(0, 100)])[0])


def test_piece_bytes_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^piece_bytes: 0 must be positive$"):
        read_records(tmp_path / "data", _fixed_records([(0, 1)])[0], piece_bytes=0)


def test_prefetch_pulls_the_front_of_the_files_into_the_cache_up_to_its_limit(tmp_path: Path) -> None:
    skip_on_memory_filesystems(tmp_path)
    first, second = tmp_path / "first", tmp_path / "second"
    _written(first, _random_bytes(1, 4 << 20))
    _written(second, bytes(64 << 20))  # well past any read-ahead window
    for path in (first, second):
        drop_from_page_cache(path)
        assert resident_pages(path) == 0
    prefetch = Prefetch([first, second], limit=(4 << 20) + (2 << 20), chunk=3 << 20)
    assert prefetch.wait() == 6 << 20
    pages = (1 << 20) // mmap.PAGESIZE
    assert resident_pages(first) == 4 * pages
    assert 2 * pages <= resident_pages(second) < 64 * pages  # read-ahead may take more than asked, not all


def test_a_stopped_prefetch_ends_and_a_failing_one_is_quiet(tmp_path: Path) -> None:
    path = tmp_path / "data"
    _written(path, bytes(4096))
    stopped = Prefetch([path] * 1000, limit=1 << 40, chunk=4096)
    stopped.stop()
    assert stopped.stopping
    assert stopped.wait() < 1000 * 4096
    assert Prefetch([tmp_path / "absent", path]).wait() == 0  # a hint: the error ends it, nothing raised
