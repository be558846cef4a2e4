import errno
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from training.checkpoint import direct_io
from training.checkpoint.direct_io import ALIGNMENT, DirectWriter, read_ranges

BUFFER = 2 * ALIGNMENT


def _buffered_open(path: str | os.PathLike, flags: int) -> tuple[int, bool]:
    return os.open(path, flags, 0o644), False


@pytest.fixture(params=["direct", "buffered"])
def direct(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Whether the writers and readers of the test go through O_DIRECT (skipped where tmp_path refuses it)."""
    if request.param == "buffered":
        monkeypatch.setattr(direct_io, "open_direct", _buffered_open)
        return False
    fd, accepted = direct_io.open_direct(tmp_path / "probe", os.O_WRONLY | os.O_CREAT)
    os.close(fd)
    (tmp_path / "probe").unlink()
    if not accepted:
        pytest.skip(f"the filesystem of {tmp_path} does not accept O_DIRECT")
    return True


def _random_bytes(seed: int, size: int) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8).tobytes()


def _is_open_on(fd: int, path: Path) -> bool:
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except OSError:
        return False


def _written(path: Path, data: bytes) -> None:
    with DirectWriter(path, buffer_bytes=BUFFER) as writer:
        writer.write(data)


@pytest.mark.parametrize(
    "sizes",
    [
        [0, 1, 4095, 4097, 20000],
        [1, 0, 8191, 1, 8192, 8193, 0, 3],
        [4096, 4096, 8192],  # ends exactly on a block and a buffer boundary
        [0],
        [],
    ],
    ids=["awkward", "around-the-buffer", "aligned", "one-empty", "nothing"],
)
def test_writes_of_any_size_come_back_exactly(tmp_path: Path, direct: bool, sizes: list[int]) -> None:
    path = tmp_path / "data"
    chunks = [_random_bytes(seed, size) for seed, size in enumerate(sizes)]
    with DirectWriter(path, buffer_bytes=BUFFER) as writer:
        assert writer.direct is direct
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


def test_one_write_larger_than_both_buffers_and_typed_memoryviews(tmp_path: Path, direct: bool) -> None:
    path = tmp_path / "data"
    words = np.random.default_rng(1).integers(0, 2**31, 10_001, dtype=np.int32)
    with DirectWriter(path, sync=False, buffer_bytes=BUFFER) as writer:
        writer.write(b"head")
        assert writer.write(memoryview(words)) == words.nbytes
        assert writer.tell() == 4 + words.nbytes
    assert path.read_bytes() == b"head" + words.tobytes()


def test_close_twice_is_harmless_and_overwrites_an_existing_file(tmp_path: Path, direct: bool) -> None:
    path = tmp_path / "data"
    path.write_bytes(b"x" * 50_000)
    writer = DirectWriter(path, buffer_bytes=BUFFER)
    writer.write(b"short")
    writer.close()
    writer.close()
    assert path.read_bytes() == b"short"


@pytest.mark.parametrize("buffers", [2, 3, 4])
def test_every_buffer_count_keeps_the_order_of_many_writes(tmp_path: Path, direct: bool, buffers: int) -> None:
    path = tmp_path / "data"
    chunks = [_random_bytes(seed, 3000 + 977 * seed) for seed in range(40)]  # ~30 buffers' worth, unaligned
    with DirectWriter(path, buffer_bytes=BUFFER, buffers=buffers) as writer:
        for chunk in chunks:
            writer.write(chunk)
    assert path.read_bytes() == b"".join(chunks)


def test_fewer_than_two_buffers_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^buffers: 1 must be at least 2 \(one filled while another is written\)$"):
        DirectWriter(tmp_path / "data", buffers=1)
    assert not (tmp_path / "data").exists()


def test_buffer_bytes_must_be_a_multiple_of_the_alignment(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^buffer_bytes: 5000 must be a multiple of 4096$"):
        DirectWriter(tmp_path / "data", buffer_bytes=5000)
    assert not (tmp_path / "data").exists()


def _failing_write(*args: Any, **kwargs: Any) -> None:
    raise OSError(errno.EIO, os.strerror(errno.EIO))


def test_a_failed_write_surfaces_from_write_and_closes_the_file(
    tmp_path: Path, direct: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(direct_io, "_pwrite_all", _failing_write)
    path = tmp_path / "data"
    with pytest.raises(OSError) as error, DirectWriter(path, buffer_bytes=BUFFER) as writer:
        assert _is_open_on(writer.fd, path)
        writer.write(bytes(3 * BUFFER))  # the second full buffer waits for the first, which failed
    assert type(error.value) is OSError
    assert error.value.errno == errno.EIO
    assert not _is_open_on(writer.fd, path)


def test_a_failed_last_write_surfaces_from_close_and_closes_the_file(
    tmp_path: Path, direct: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(direct_io, "_pwrite_all", _failing_write)
    path = tmp_path / "data"
    writer = DirectWriter(path, buffer_bytes=BUFFER)
    writer.write(b"only the tail")
    with pytest.raises(OSError) as error:
        writer.close()
    assert type(error.value) is OSError
    assert error.value.errno == errno.EIO
    assert not _is_open_on(writer.fd, path)
    writer.close()  # already closed: nothing more to do, nothing raised


def test_an_error_inside_the_with_block_aborts_and_closes_the_file(tmp_path: Path, direct: bool) -> None:
    path = tmp_path / "data"
    with pytest.raises(KeyError), DirectWriter(path, buffer_bytes=BUFFER) as writer:
        writer.write(bytes(BUFFER + 10))
        raise KeyError("caller failed")
    assert not _is_open_on(writer.fd, path)


def _random_ranges(rng: np.random.Generator, size: int) -> list[tuple[int, int]]:
    ranges = [(0, size), (size, 0), (0, 0), (size - 1, 1), (size - 3 * BUFFER - 5, 3 * BUFFER + 5)]
    for _ in range(60):
        start = int(rng.integers(0, size))
        longest = size - start
        length = int(rng.integers(0, min(longest, BUFFER) + 1))
        ranges.append((start, length))
    for _ in range(20):  # across many segments
        start = int(rng.integers(0, size - 6 * BUFFER))
        ranges.append((start, int(rng.integers(4 * BUFFER, size - start + 1))))
    for segment in range(0, size, BUFFER):  # boundaries exactly
        ranges.extend([(segment, min(BUFFER, size - segment)), (max(segment - 1, 0), 2)])
    return [ranges[i] for i in rng.permutation(len(ranges))]


@pytest.mark.parametrize("threads", [1, 4])
def test_read_ranges_fills_every_destination_from_the_file(tmp_path: Path, direct: bool, threads: int) -> None:
    path = tmp_path / "data"
    size = 25 * BUFFER + 1234
    data = _random_bytes(7, size)
    _written(path, data)
    rng = np.random.default_rng(1234)
    ranges = _random_ranges(rng, size)
    destinations = [(start, memoryview(bytearray(length))) for start, length in ranges]
    read_ranges(path, destinations, threads=threads, segment_bytes=BUFFER)
    for (start, length), (_, into) in zip(ranges, destinations, strict=True):
        assert into.tobytes() == data[start : start + length], (start, length)


def test_read_ranges_fills_typed_destinations(tmp_path: Path, direct: bool) -> None:
    path = tmp_path / "data"
    words = np.random.default_rng(3).integers(-(2**62), 2**62, 5000, dtype=np.int64)
    _written(path, b"prefix" + words.tobytes())
    into = np.zeros(4000, dtype=np.int64)
    read_ranges(path, [(6 + 8 * 1000, memoryview(into))], threads=2, segment_bytes=BUFFER)
    assert np.array_equal(into, words[1000:])


def test_read_ranges_of_nothing_does_not_open_the_file(tmp_path: Path) -> None:
    read_ranges(tmp_path / "absent", [(0, memoryview(bytearray())), (100, memoryview(bytearray()))])


def test_read_ranges_past_the_end_name_the_file(tmp_path: Path, direct: bool) -> None:
    path = tmp_path / "data"
    _written(path, bytes(10_000))
    ranges = [(0, memoryview(bytearray(100))), (9_000, memoryview(bytearray(1_001)))]
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}: holds 10000 bytes, records run to byte 10001"):
        read_ranges(path, ranges, segment_bytes=BUFFER)
    read_ranges(path, [(9_000, memoryview(bytearray(1_000)))], segment_bytes=BUFFER)  # up to the end exactly


def test_read_ranges_segment_bytes_must_be_a_multiple_of_the_alignment(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^segment_bytes: 1000 must be a multiple of 4096$"):
        read_ranges(tmp_path / "data", [(0, memoryview(bytearray(1)))], segment_bytes=1000)
