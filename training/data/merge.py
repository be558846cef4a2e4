"""Merge prepared shards, in order, into one dataset: the bytes `prepare` writes from all their inputs at once.

The sequences of each shard are appended as megatron-core's `IndexedDatasetBuilder.add_index` appends an index
(each document one sequence, the document boundaries offset by the sequences before), through the streaming
writer (training.data.index_writer): memory does not grow with the document count. Each shard's sha256 is
checked from the bytes as they are copied, and the merged files' from the bytes as they are written, so every
byte is read once and written once.
"""

import hashlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from training.data.errors import DataError
from training.data.index_writer import StreamingIndexedWriter
from training.data.indexed import bin_path, idx_path, read_index
from training.data.manifest import DatasetManifest, FileRecord, manifest_path
from training.data.verify import verify_dataset

_COPY_CHUNK_BYTES = 8 * 1024 * 1024
_LENGTHS_PER_CHUNK = 1 << 16
# What every shard must share with the others: one tokenizer, one dtype, one separator.
_SHARED_FIELDS = ("tokenizer_sha256", "tokenizer_file", "vocab_size", "dtype", "eod_id", "eod_token")


def merge_datasets(shards: Sequence[str | Path], output: str | Path) -> DatasetManifest:
    """Write `<output>.{bin,idx,manifest.json}` from the datasets at the `shards` prefixes, in that order."""
    if not shards:
        raise DataError("merge: no shards given")
    prefixes = [Path(shard) for shard in shards]
    manifests = [verify_dataset(prefix) for prefix in prefixes]
    first = manifests[0]
    for prefix, manifest in zip(prefixes[1:], manifests[1:], strict=True):
        for name in _SHARED_FIELDS:
            if getattr(manifest, name) != getattr(first, name):
                raise DataError(
                    f"{manifest_path(prefix)}: {name}: {getattr(manifest, name)!r} differs from "
                    f"{getattr(first, name)!r} in {manifest_path(prefixes[0])}; shards of one dataset share a tokenizer"
                )
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    final_bin, final_idx = bin_path(output), idx_path(output)
    partial_bin = final_bin.with_name(final_bin.name + ".partial")
    partial_idx = final_idx.with_name(final_idx.name + ".partial")
    writer = StreamingIndexedWriter(partial_bin, partial_idx, np.dtype(first.dtype).type)
    try:
        for prefix, manifest in zip(prefixes, manifests, strict=True):
            digest = hashlib.sha256()
            writer.add_existing(_checked_chunks(bin_path(prefix), digest), _length_chunks(idx_path(prefix)))
            if digest.hexdigest() != manifest.bin.sha256:
                raise DataError(
                    f"{bin_path(prefix)}: sha256 mismatch: manifest expects {manifest.bin.sha256}, found "
                    f"{digest.hexdigest()}; prepare this shard again"
                )
        writer.finalize()
    except BaseException:
        writer.abort()
        raise
    manifest_path(output).unlink(missing_ok=True)
    os.replace(partial_bin, final_bin)
    os.replace(partial_idx, final_idx)
    merged = DatasetManifest(
        **{name: getattr(first, name) for name in _SHARED_FIELDS},
        document_count=sum(m.document_count for m in manifests),
        token_count=sum(m.token_count for m in manifests),
        bin=FileRecord(name=final_bin.name, size=writer.bin.size, sha256=writer.bin.hexdigest()),
        idx=FileRecord(name=final_idx.name, size=writer.finished_idx.size, sha256=writer.finished_idx.hexdigest()),
        sources=[source for m in manifests for source in m.sources],
        skipped_empty_documents=sum(m.skipped_empty_documents for m in manifests),
    )
    merged.write(manifest_path(output))
    return merged


def _checked_chunks(path: Path, digest: "hashlib._Hash") -> Iterator[bytes]:
    with path.open("rb") as handle:
        while chunk := handle.read(_COPY_CHUNK_BYTES):
            digest.update(chunk)
            yield chunk


def _length_chunks(path: Path) -> Iterator[np.ndarray]:
    lengths = read_index(path).sequence_lengths
    for start in range(0, len(lengths), _LENGTHS_PER_CHUNK):
        yield np.array(lengths[start : start + _LENGTHS_PER_CHUNK])
