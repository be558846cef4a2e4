"""The dataset writer: the manifest's checksums come from the bytes as they are written, not from a re-read."""

import sys
import tracemalloc
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.training.data.conftest import EOD_ID, VOCAB_SIZE, random_documents
from training.data import index_writer
from training.data.errors import DataError
from training.data.indexed import bin_path, idx_path, token_dtype_for_vocab
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


def _write(prefix: Path, documents: list[np.ndarray], vocab_size: int = VOCAB_SIZE) -> None:
    source = prefix.with_name("source.txt")
    source.write_text("synthetic\n", encoding="utf-8")
    info = TokenizerInfo(sha256="0" * 64, vocab_size=vocab_size, eod_id=EOD_ID, eod_token="<|endoftext|>")
    write_dataset(prefix, ((0, document) for document in documents), info, [source])


def test_bin_checksum_is_computed_while_writing(tmp_path: Path, read_opens: list[str]) -> None:
    prefix = tmp_path / "data_text_document"
    _write(prefix, random_documents(500, seed=3))
    written_bin = bin_path(prefix)
    assert [path for path in read_opens if Path(path).name.startswith(written_bin.name)] == []
    manifest = read_manifest(manifest_path(prefix))
    assert manifest.bin.sha256 == sha256_file(written_bin)
    assert manifest.bin.size == written_bin.stat().st_size


def _megatron_core_build(prefix: Path, documents: list[np.ndarray], dtype: type[np.number]) -> None:
    # The oracle: megatron-core's own builder over the same sequences (tokens then one EOD each).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder

    builder = IndexedDatasetBuilder(str(bin_path(prefix)), dtype=dtype)
    for document in documents:
        sequence = np.append(document, EOD_ID).astype(dtype)
        builder.add_document(sequence, [sequence.size])
    builder.finalize(str(idx_path(prefix)))


@pytest.mark.parametrize(("vocab_size", "chunk"), [(VOCAB_SIZE, 1 << 20), (VOCAB_SIZE, 7), (70_000, 5)])
def test_output_is_byte_identical_to_megatron_core_builder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, vocab_size: int, chunk: int
) -> None:
    # A small finalize chunk makes a few hundred documents cross many chunk boundaries.
    monkeypatch.setattr(index_writer, "_FINALIZE_CHUNK", chunk)
    documents = random_documents(300, seed=5)
    ours = tmp_path / "ours_text_document"
    _write(ours, documents, vocab_size=vocab_size)
    theirs = tmp_path / "theirs_text_document"
    _megatron_core_build(theirs, documents, token_dtype_for_vocab(vocab_size))
    assert bin_path(ours).read_bytes() == bin_path(theirs).read_bytes()
    assert idx_path(ours).read_bytes() == idx_path(theirs).read_bytes()
    assert sorted(path.name for path in tmp_path.iterdir() if path.name.startswith("ours")) == [
        "ours_text_document.bin",
        "ours_text_document.idx",
        "ours_text_document.manifest.json",
    ]
    manifest = read_manifest(manifest_path(ours))
    assert manifest.idx.sha256 == sha256_file(idx_path(ours))
    assert manifest.idx.size == idx_path(ours).stat().st_size


def test_megatron_core_reads_what_we_write(tmp_path: Path) -> None:
    documents = random_documents(50, seed=8)
    prefix = tmp_path / "data_text_document"
    _write(prefix, documents)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.datasets.indexed_dataset import IndexedDataset

    dataset = IndexedDataset(str(prefix), mmap=True)
    assert len(dataset) == len(documents)
    for index, document in enumerate(documents):
        np.testing.assert_array_equal(dataset[index], np.append(document, EOD_ID))


def _traced_peak_bytes(prefix: Path, documents: int) -> int:
    document = np.arange(1, 9)

    def repeated() -> Iterator[tuple[int, np.ndarray]]:
        for _ in range(documents):
            yield 0, document

    source = prefix.with_name("source.txt")
    source.write_text("synthetic\n", encoding="utf-8")
    info = TokenizerInfo(sha256="0" * 64, vocab_size=VOCAB_SIZE, eod_id=EOD_ID, eod_token="<|endoftext|>")
    tracemalloc.start()
    try:
        write_dataset(prefix, repeated(), info, [source])
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_document_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # With finalize's chunk below both counts, every buffer is the same size for both; megatron-core's builder
    # kept about 100 bytes a document in Python lists.
    monkeypatch.setattr(index_writer, "_FINALIZE_CHUNK", 1024)
    small = _traced_peak_bytes(tmp_path / "small", 10_000)
    large = _traced_peak_bytes(tmp_path / "large", 100_000)
    assert large - small < 90_000, f"peak {small} bytes for 10,000 documents, {large} for 100,000"


def test_a_refused_document_leaves_no_file_behind(tmp_path: Path) -> None:
    # The lengths' temporary file goes with the .partial files when a document is refused midway.
    documents = [*random_documents(100, seed=2), np.array([5, VOCAB_SIZE + 3]), *random_documents(10, seed=4)]
    prefix = tmp_path / "refused_text_document"
    with pytest.raises(DataError, match=f"token id {VOCAB_SIZE + 3} outside the vocabulary of {VOCAB_SIZE}"):
        _write(prefix, documents)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["source.txt"]
