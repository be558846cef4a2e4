import pytest

from bench.read_ahead_sweep import parse_args, read_ahead
from training.data import loader


def test_read_ahead_sets_exact_chunks_and_restores_the_loaders_sizes() -> None:
    before = loader.READ_AHEAD_BATCHES, loader.READ_AHEAD_BYTES
    with read_ahead(64, batch_bytes=65_552):
        assert loader.read_ahead_batches(65_552) == 64
    assert before == (loader.READ_AHEAD_BATCHES, loader.READ_AHEAD_BYTES)


def test_read_ahead_restores_the_sizes_when_the_benchmark_fails() -> None:
    before = loader.READ_AHEAD_BATCHES, loader.READ_AHEAD_BYTES
    with pytest.raises(RuntimeError), read_ahead(4, batch_bytes=10):
        raise RuntimeError("benchmark failed")
    assert before == (loader.READ_AHEAD_BATCHES, loader.READ_AHEAD_BYTES)


def test_a_chunk_size_below_one_is_refused_naming_the_value(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--batches", "16", "0"])
    assert "--batches: 0 must be >= 1" in capsys.readouterr().err
