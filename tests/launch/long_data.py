"""A dataset long enough for the shipped GPU job configs' sequences (up to 8192 tokens) to fill every split, written
by the repo's own writer (training.data.writer) from seeded random tokens: what llm-submit's data checks read."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from training.data.writer import TokenizerInfo, write_dataset

# The tiny shape's vocabulary, so a `vocab_size: data` job sizes its table as the planner does (named shape).
VOCAB = 8192


def write_long_dataset(
    prefix: Path, tokenizer_json: Path, documents: int = 2000, tokens_per_document: int = 10_000
) -> str:
    """`tokenizer_json` (a prepared dataset's, smaller than VOCAB) is what nemo and neuron copy to the run."""
    rng = np.random.default_rng(0)
    shutil.copyfile(tokenizer_json, prefix.parent / "tokenizer.json")
    tokenizer = TokenizerInfo(
        sha256="0" * 64, vocab_size=VOCAB, eod_id=0, eod_token="<|endoftext|>", file_name="tokenizer.json"
    )
    source = prefix.with_suffix(".source")
    source.write_text("seeded random tokens\n", encoding="utf-8")
    docs = ((0, rng.integers(1, VOCAB, tokens_per_document, dtype=np.int64)) for _ in range(documents))
    write_dataset(prefix, docs, tokenizer, [source])
    return str(prefix)
