"""Write Megatron's indexed dataset (.bin/.idx) in memory that does not grow with the document count.

megatron-core's IndexedDatasetBuilder keeps every sequence length and document index in Python lists until
`finalize` (about 107 bytes a document), which at pretraining scale exceeds a head node's memory. This writer
appends each length to a temporary file as int32 and, at the end, streams the .idx's header, lengths, byte
pointers and document indices in fixed-size chunks. Its output is byte-identical to megatron-core 0.16.1's builder
given the same documents, each one sequence (the layout is in training.data.indexed). Both files' sha256 are
computed from the bytes as they are written, so nothing is read back for the manifest.
"""

import hashlib
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np

from training.data.indexed import DTYPE_BY_CODE, INDEX_MAGIC, INDEX_VERSION

# Sequences handled per step at finalize: 256 KiB of lengths and 512 KiB of pointers, small beside numpy itself.
_FINALIZE_CHUNK = 1 << 16
_CODE_BY_DTYPE = {np.dtype(dtype): code for code, dtype in DTYPE_BY_CODE.items()}


class HashingFile:
    """A file opened for writing that keeps the sha256 and size of everything written to it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle: BinaryIO = path.open("wb")
        self._digest = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes | memoryview) -> None:
        self._handle.write(data)
        self._digest.update(data)
        self.size += len(data)

    def close(self) -> None:
        self._handle.close()

    def hexdigest(self) -> str:
        return self._digest.hexdigest()


class StreamingIndexedWriter:
    """Append documents (one sequence each) to `bin_file`; `finalize` writes `idx_file`; `abort` removes all."""

    def __init__(self, bin_file: Path, idx_file: Path, dtype: type[np.number]) -> None:
        self.dtype = np.dtype(dtype)
        self.idx_file = idx_file
        self._lengths_file = idx_file.with_name(idx_file.name + ".lengths")
        self.bin = HashingFile(bin_file)
        self._lengths: BinaryIO = self._lengths_file.open("wb")
        self.sequence_count = 0
        self.idx: HashingFile | None = None

    def add_document(self, sequence: np.ndarray) -> None:
        data = np.ascontiguousarray(sequence, dtype=self.dtype)
        self.bin.write(data.data.cast("B"))
        self._lengths.write(struct.pack("<i", data.size))
        self.sequence_count += 1

    def add_existing(self, token_chunks: Iterable[bytes], length_chunks: Iterable[np.ndarray]) -> None:
        """Append an existing dataset's sequences, as megatron-core's builder `add_index` does: its .bin bytes in
        any chunks, and its sequence lengths. Each sequence stays one document. Memory is one chunk of each."""
        written = 0
        for chunk in token_chunks:
            self.bin.write(chunk)
            written += len(chunk)
        expected = 0
        for lengths in length_chunks:
            self._lengths.write(np.ascontiguousarray(lengths, dtype="<i4").tobytes())
            self.sequence_count += len(lengths)
            expected += int(np.sum(lengths, dtype=np.int64)) * self.dtype.itemsize
        if written != expected:
            raise ValueError(f"{written} bytes of tokens appended for sequences totalling {expected} bytes")

    @property
    def finished_idx(self) -> HashingFile:
        if self.idx is None:
            raise RuntimeError("the .idx is written by finalize()")
        return self.idx

    def finalize(self) -> None:
        self.bin.close()
        self._lengths.close()
        idx = self.idx = HashingFile(self.idx_file)
        try:
            idx.write(INDEX_MAGIC)
            idx.write(struct.pack("<Q", INDEX_VERSION))
            idx.write(struct.pack("<B", _CODE_BY_DTYPE[self.dtype]))
            idx.write(struct.pack("<Q", self.sequence_count))
            # One document boundary before the first sequence and one after each (each document is one sequence).
            idx.write(struct.pack("<Q", self.sequence_count + 1))
            self._copy_lengths(idx)
            self._write_pointers(idx)
            self._write_document_indices(idx)
        finally:
            idx.close()
        self._lengths_file.unlink()

    def abort(self) -> None:
        self.bin.close()
        self._lengths.close()
        if self.idx is not None:
            self.idx.close()
        for path in (self.bin.path, self.idx_file, self._lengths_file):
            path.unlink(missing_ok=True)

    def _length_chunks(self) -> Iterator[np.ndarray]:
        with self._lengths_file.open("rb") as lengths:
            while chunk := lengths.read(_FINALIZE_CHUNK * 4):
                yield np.frombuffer(chunk, dtype="<i4")

    def _copy_lengths(self, idx: HashingFile) -> None:
        for chunk in self._length_chunks():
            idx.write(chunk.tobytes())

    def _write_pointers(self, idx: HashingFile) -> None:
        # Each sequence's byte offset in the .bin: the sum of the lengths before it, times the token size.
        offset = 0
        for chunk in self._length_chunks():
            ends = np.cumsum(chunk, dtype=np.int64) * self.dtype.itemsize + offset
            pointers = np.empty_like(ends)
            pointers[0] = offset
            pointers[1:] = ends[:-1]
            idx.write(pointers.astype("<i8").tobytes())
            offset = int(ends[-1])

    def _write_document_indices(self, idx: HashingFile) -> None:
        for start in range(0, self.sequence_count + 1, _FINALIZE_CHUNK):
            stop = min(start + _FINALIZE_CHUNK, self.sequence_count + 1)
            idx.write(np.arange(start, stop, dtype="<i8").tobytes())
