from pathlib import Path

import numpy as np

from bench.checkpoint import read_into, write_with_fsync


def test_plain_write_and_read_round_trip_the_bytes(tmp_path: Path) -> None:
    data = np.random.default_rng(0).integers(0, 256, size=3 * 1024 * 1024 + 5, dtype=np.uint8)
    path = tmp_path / "raw.bin"
    write_with_fsync(path, memoryview(data))
    buffer = np.empty_like(data)
    assert read_into(path, memoryview(buffer)) == data.size
    assert np.array_equal(buffer, data)
