"""The dataset writer: the manifest's checksums come from the bytes as they are written, not from a re-read."""

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.training.data.conftest import EOD_ID, VOCAB_SIZE, random_documents
from training.data.indexed import bin_path
from training.data.manifest import manifest_path, read_manifest, sha256_file
from training.data.writer import TokenizerInfo, write_dataset

_READ_OPENS: list[str] | None = None


def _record_read_opens(event: str, args: tuple[Any, ...]) -> None:
    # An audit hook sees every open() in the process, numpy's and the standard library's included.
    if _READ_OPENS is not None and event == "open" and isinstance(args[0], str | Path):
        mode = args[1] if isinstance(args[1], str) else "r"
        if "r" in mode or "+" in mode:
            _READ_OPENS.append(str(args[0]))


sys.addaudithook(_record_read_opens)


@pytest.fixture
def read_opens() -> Iterator[list[str]]:
    global _READ_OPENS
    _READ_OPENS = []
    try:
        yield _READ_OPENS
    finally:
        _READ_OPENS = None


def _write(prefix: Path, documents: list[np.ndarray]) -> None:
    source = prefix.with_name("source.txt")
    source.write_text("synthetic\n", encoding="utf-8")
    info = TokenizerInfo(sha256="0" * 64, vocab_size=VOCAB_SIZE, eod_id=EOD_ID, eod_token="<|endoftext|>")
    write_dataset(prefix, ((0, document) for document in documents), info, [source])


def test_bin_checksum_is_computed_while_writing(tmp_path: Path, read_opens: list[str]) -> None:
    prefix = tmp_path / "data_text_document"
    _write(prefix, random_documents(500, seed=3))
    written_bin = bin_path(prefix)
    assert [path for path in read_opens if Path(path).name.startswith(written_bin.name)] == []
    manifest = read_manifest(manifest_path(prefix))
    assert manifest.bin.sha256 == sha256_file(written_bin)
    assert manifest.bin.size == written_bin.stat().st_size
