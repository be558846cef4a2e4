"""Read Megatron's indexed dataset format (.bin/.idx) with numpy memmaps, without importing megatron-core.

The .idx layout (little-endian): magic, version, dtype code, sequence count S, document-boundary count D,
then S int32 sequence lengths, S int64 byte offsets into the .bin and D int64 document boundaries.
The .bin holds the token arrays back to back with no header.
"""

import struct
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from training.data.errors import DataError

INDEX_MAGIC = b"MMIDIDX\x00\x00"
INDEX_VERSION = 1
INDEX_HEADER_BYTES = len(INDEX_MAGIC) + 8 + 1 + 8 + 8

# Megatron's dtype codes. Code 7 is float32 in megatron-core but something else in older NeMo/Neuron readers,
# which is one reason we only ever write uint16 (8) or int32 (4).
DTYPE_BY_CODE: dict[int, type[np.number]] = {
    1: np.uint8,
    2: np.int8,
    3: np.int16,
    4: np.int32,
    5: np.int64,
    6: np.float64,
    7: np.float32,
    8: np.uint16,
}
TOKEN_DTYPE_CODES = {4, 8}
# Megatron's own cut-off: vocabularies at or above this size are stored as int32.
UINT16_VOCAB_LIMIT = 65_500


def token_dtype_for_vocab(vocab_size: int) -> type[np.number]:
    """uint16 while every token id fits with headroom, else int32 (the choice megatron-core makes)."""
    return np.uint16 if vocab_size < UINT16_VOCAB_LIMIT else np.int32


def bin_path(prefix: str | Path) -> Path:
    return Path(f"{prefix}.bin")


def idx_path(prefix: str | Path) -> Path:
    return Path(f"{prefix}.idx")


@dataclass(frozen=True)
class IndexFile:
    """The parsed contents of one .idx file; the arrays are read-only memmaps."""

    path: Path
    dtype: np.dtype
    sequence_lengths: np.ndarray
    sequence_pointers: np.ndarray
    document_indices: np.ndarray

    @property
    def sequence_count(self) -> int:
        return len(self.sequence_lengths)

    @property
    def document_count(self) -> int:
        return max(len(self.document_indices) - 1, 0)

    @cached_property
    def token_offsets(self) -> np.ndarray:
        """Token offset of each sequence in the .bin, plus the total at the end (length S + 1)."""
        offsets = np.zeros(self.sequence_count + 1, dtype=np.int64)
        np.cumsum(self.sequence_lengths, dtype=np.int64, out=offsets[1:])
        return offsets

    @property
    def token_count(self) -> int:
        return int(self.token_offsets[-1])

    @property
    def expected_bin_bytes(self) -> int:
        return self.token_count * self.dtype.itemsize

    def document_token_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(start, end) token offsets in the .bin of every document."""
        offsets = self.token_offsets
        return offsets[self.document_indices[:-1]], offsets[self.document_indices[1:]]


def read_index(path: str | Path) -> IndexFile:
    """Parse and sanity-check an .idx file; every inconsistency is a one-line DataError naming the file."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: index file not found")
    actual_bytes = path.stat().st_size
    if actual_bytes < INDEX_HEADER_BYTES:
        raise DataError(
            f"{path}: truncated .idx: expected at least {INDEX_HEADER_BYTES} header bytes, found {actual_bytes}"
        )
    with path.open("rb") as handle:
        header = handle.read(INDEX_HEADER_BYTES)
    magic = header[: len(INDEX_MAGIC)]
    if magic != INDEX_MAGIC:
        raise DataError(f"{path}: not a Megatron .idx file (magic {magic!r}, expected {INDEX_MAGIC!r})")
    version, dtype_code, sequence_count, boundary_count = struct.unpack("<QBQQ", header[len(INDEX_MAGIC) :])
    if version != INDEX_VERSION:
        raise DataError(f"{path}: unsupported .idx version {version} (expected {INDEX_VERSION})")
    if dtype_code not in DTYPE_BY_CODE:
        raise DataError(f"{path}: unknown dtype code {dtype_code}")
    expected_bytes = INDEX_HEADER_BYTES + sequence_count * (4 + 8) + boundary_count * 8
    if actual_bytes == expected_bytes + sequence_count:
        raise DataError(f"{path}: multimodal .idx files (with sequence modes) are not supported")
    if actual_bytes != expected_bytes:
        state = "truncated" if actual_bytes < expected_bytes else "oversized"
        raise DataError(
            f"{path}: {state} .idx: header says {sequence_count} sequences and {boundary_count} document "
            f"boundaries, so expected {expected_bytes} bytes, found {actual_bytes}"
        )
    offset = INDEX_HEADER_BYTES
    lengths = _memmap(path, np.int32, offset, sequence_count)
    offset += sequence_count * 4
    pointers = _memmap(path, np.int64, offset, sequence_count)
    offset += sequence_count * 8
    boundaries = _memmap(path, np.int64, offset, boundary_count)
    index = IndexFile(path, np.dtype(DTYPE_BY_CODE[dtype_code]), lengths, pointers, boundaries)
    _check_consistency(index)
    return index


def _memmap(path: Path, dtype: type[np.number], offset: int, count: int) -> np.ndarray:
    if count == 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=(count,))


def _check_consistency(index: IndexFile) -> None:
    path = index.path
    if index.sequence_count and int(index.sequence_lengths.min()) < 0:
        raise DataError(f"{path}: negative sequence length in .idx")
    expected_pointers = index.token_offsets[:-1] * index.dtype.itemsize
    if not np.array_equal(index.sequence_pointers, expected_pointers):
        first_bad = int(np.flatnonzero(index.sequence_pointers != expected_pointers)[0])
        raise DataError(
            f"{path}: sequence {first_bad} starts at byte {int(index.sequence_pointers[first_bad])}, "
            f"expected {int(expected_pointers[first_bad])} (sequences must be contiguous)"
        )
    boundaries = index.document_indices
    if len(boundaries) == 0 or boundaries[0] != 0 or boundaries[-1] != index.sequence_count:
        raise DataError(
            f"{path}: document boundaries must run from 0 to the sequence count {index.sequence_count}, "
            f"found {boundaries[:1].tolist()} .. {boundaries[-1:].tolist()}"
        )
    if np.any(np.diff(boundaries) < 0):
        raise DataError(f"{path}: document boundaries are not sorted")


def open_tokens(prefix: str | Path, index: IndexFile) -> np.ndarray:
    """Memory-map the .bin (never read whole); its size must match what the .idx describes."""
    path = bin_path(prefix)
    check_bin_size(path, index)
    if index.token_count == 0:
        return np.zeros(0, dtype=index.dtype)
    return np.memmap(path, dtype=index.dtype, mode="r", shape=(index.token_count,))


def check_bin_size(path: Path, index: IndexFile) -> None:
    if not path.is_file():
        raise DataError(f"{path}: data file not found")
    actual = path.stat().st_size
    expected = index.expected_bin_bytes
    if actual != expected:
        state = "truncated" if actual < expected else "oversized"
        raise DataError(
            f"{path}: {state} .bin: {index.path.name} describes {index.token_count} {index.dtype.name} tokens, "
            f"so expected {expected} bytes, found {actual}"
        )
