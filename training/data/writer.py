"""Write tokenized documents as a Megatron indexed dataset, plus the manifest.

The .bin/.idx are written by training.data.index_writer, in memory independent of the document count and
byte-identical to megatron-core's IndexedDatasetBuilder.

Each document becomes one sequence: its tokens followed by exactly one EOD id. Nothing else is added, so the
loader's packed stream has exactly one EOD between neighbouring documents.
"""

import os
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from training.data.errors import DataError
from training.data.index_writer import StreamingIndexedWriter
from training.data.indexed import bin_path, idx_path, token_dtype_for_vocab
from training.data.manifest import DatasetManifest, FileRecord, SourceRecord, manifest_path, sha256_file


def _indexed_dataset_builder() -> type:
    """megatron-core's builder, which the SFT writer still uses (its datasets are small)."""
    # megatron-core warns at import that Transformer Engine and Apex are absent; irrelevant to writing data.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder
    return IndexedDatasetBuilder


@dataclass(frozen=True)
class TokenizerInfo:
    sha256: str
    vocab_size: int
    eod_id: int
    eod_token: str
    file_name: str | None = None  # set when the tokenizer.json sits beside the dataset


@dataclass
class WriteStats:
    documents: int = 0
    tokens: int = 0
    skipped_empty: int = 0
    documents_per_source: list[int] = field(default_factory=list)


def write_dataset(
    prefix: str | Path,
    documents: Iterable[tuple[int, np.ndarray]],
    tokenizer: TokenizerInfo,
    sources: list[Path],
) -> DatasetManifest:
    """Write `<prefix>.{bin,idx}` and `<prefix>.manifest.json` from (source index, token ids) pairs.

    Empty documents are skipped: writing one would put two EOD ids side by side.
    Files are written under temporary names and renamed at the end, so a failed run leaves no valid-looking dataset.
    """
    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    dtype = token_dtype_for_vocab(tokenizer.vocab_size)
    final_bin, final_idx = bin_path(prefix), idx_path(prefix)
    partial_bin = final_bin.with_name(final_bin.name + ".partial")
    partial_idx = final_idx.with_name(final_idx.name + ".partial")
    stats = WriteStats(documents_per_source=[0] * len(sources))
    # The checksums come from the bytes as they are written: at a trillion tokens a second pass over the .bin
    # costs hours of file-system reads.
    writer = StreamingIndexedWriter(partial_bin, partial_idx, dtype)
    try:
        for source_index, ids in documents:
            if ids.size == 0:
                stats.skipped_empty += 1
                continue
            _check_ids(ids, tokenizer, sources[source_index])
            sequence = np.empty(ids.size + 1, dtype=dtype)
            sequence[:-1] = ids
            sequence[-1] = tokenizer.eod_id
            writer.add_document(sequence)
            stats.documents += 1
            stats.tokens += sequence.size
            stats.documents_per_source[source_index] += 1
        writer.finalize()
    except BaseException:
        writer.abort()
        raise
    if stats.documents == 0:
        partial_bin.unlink(missing_ok=True)
        partial_idx.unlink(missing_ok=True)
        raise DataError(f"--input: empty corpus: no document in {[str(s) for s in sources]} produced any tokens")
    # Every input is read: only now do the old manifest (stale once the data is replaced) and data go.
    manifest_path(prefix).unlink(missing_ok=True)
    os.replace(partial_bin, final_bin)
    os.replace(partial_idx, final_idx)
    manifest = DatasetManifest(
        tokenizer_sha256=tokenizer.sha256,
        tokenizer_file=tokenizer.file_name,
        vocab_size=tokenizer.vocab_size,
        dtype=np.dtype(dtype).name,
        eod_id=tokenizer.eod_id,
        eod_token=tokenizer.eod_token,
        document_count=stats.documents,
        token_count=stats.tokens,
        bin=FileRecord(name=final_bin.name, size=writer.bin.size, sha256=writer.bin.hexdigest()),
        idx=FileRecord(name=final_idx.name, size=writer.finished_idx.size, sha256=writer.finished_idx.hexdigest()),
        sources=[
            SourceRecord(path=str(source), size=source.stat().st_size, sha256=sha256_file(source), documents=count)
            for source, count in zip(sources, stats.documents_per_source, strict=True)
        ],
        skipped_empty_documents=stats.skipped_empty,
    )
    manifest.write(manifest_path(prefix))
    return manifest


def _check_ids(ids: np.ndarray, tokenizer: TokenizerInfo, source: Path) -> None:
    if int(ids.min()) < 0 or int(ids.max()) >= tokenizer.vocab_size:
        raise DataError(f"{source}: token id {int(ids.max())} outside the vocabulary of {tokenizer.vocab_size}")
    if np.any(ids == tokenizer.eod_id):
        # Would be a second separator inside a document; the tokenizer setup is meant to make this impossible.
        raise DataError(f"{source}: a document encoded to the EOD id {tokenizer.eod_id} ({tokenizer.eod_token!r})")


def _file_record(path: Path) -> FileRecord:
    return FileRecord(name=path.name, size=path.stat().st_size, sha256=sha256_file(path))
