from pathlib import Path

import numpy as np

from bench.checkpoint import read_into, write_with_fsync


def test_plain_write_and_read_round_trip_the_bytes(tmp_path: Path) -> None:
    data = np.random.default_rng(0).integers(0, 256, size=3 * 1024 * 1024 + 5, dtype=np.uint8)
    path = tmp_path / "raw.bin"
    write_with_fsync(path, memoryview(data))
    buffer = np.empty_like(data)
    assert read_into([path], memoryview(buffer)) == data.size
    assert np.array_equal(buffer, data)


def test_several_files_are_read_one_after_the_other(tmp_path: Path) -> None:
    # The load baseline reads a checkpoint's files (metadata, rank files, trainer state) into one buffer.
    data = np.random.default_rng(1).integers(0, 256, size=5_000_003, dtype=np.uint8)
    cuts = [0, 17, 4_000_000, data.size]
    paths = [tmp_path / f"part{index}" for index in range(len(cuts) - 1)]
    for path, start, end in zip(paths, cuts, cuts[1:], strict=False):
        write_with_fsync(path, memoryview(data[start:end]))
    buffer = np.empty_like(data)
    assert read_into(paths, memoryview(buffer)) == data.size
    assert np.array_equal(buffer, data)
