"""Synthetic datasets written through the real writer (megatron-core's builder), for loader and verify tests."""

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from training.data.writer import TokenizerInfo, write_dataset

EOD_ID = 0
VOCAB_SIZE = 1000

MakeDataset = Callable[..., str]


def random_documents(count: int, seed: int = 0, min_len: int = 1, max_len: int = 40) -> list[np.ndarray]:
    """Documents of random non-EOD tokens, so every packed sample is distinguishable from every other."""
    rng = np.random.default_rng(seed)
    return [rng.integers(1, VOCAB_SIZE, size=int(rng.integers(min_len, max_len + 1))) for _ in range(count)]


@pytest.fixture
def make_dataset(tmp_path: Path) -> MakeDataset:
    def make(documents: list[np.ndarray], name: str = "synthetic", vocab_size: int = VOCAB_SIZE) -> str:
        source = tmp_path / f"{name}.source.txt"
        source.write_text(f"{len(documents)} synthetic documents\n", encoding="utf-8")
        prefix = tmp_path / f"{name}_text_document"
        info = TokenizerInfo(sha256="0" * 64, vocab_size=vocab_size, eod_id=EOD_ID, eod_token="<|endoftext|>")
        write_dataset(prefix, ((0, doc) for doc in documents), info, [source])
        return str(prefix)

    return make
