"""Fixtures for the SFT data tests: a small real tokenizer trained on the demo corpus, and SFT rows."""

import json
from pathlib import Path

import pytest

from training.data.tokenizer import train_byte_level_bpe

TEXTS = [
    "What does json.dumps do? Serialize obj to a JSON formatted str.",
    "Return the absolute value of the argument. Question Answer User Assistant",
] * 20


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with a byte-level BPE tokenizer.json (EOD <|endoftext|> = 0) and no tokenizer_config.json."""
    directory = tmp_path_factory.mktemp("tokenizer")
    train_byte_level_bpe(TEXTS, 300).save(str(directory / "tokenizer.json"))
    return directory


def write_rows(path: Path, rows: list[object]) -> Path:
    path.write_text("".join(row if isinstance(row, str) else json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path
