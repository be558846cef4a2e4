"""Where a tensor's bytes sit inside one `torch.save` record, so a reader can copy them straight into place.

DCP's stock format stores every tensor as its own `torch.save` zip archive inside the rank's file: small entries
(`data.pkl`, `byteorder`, ...), then `data/0`, the storage bytes stored uncompressed, then the central directory.
`tensor_data_span` is given the first and last few KiB of such a record: it reads the central directory (zip and
zip64 end records) from the tail and the small entries from the head, checking their CRCs, and a restricted
unpickler records the tensor's layout from data.pkl. (Python's zipfile does the same through a file object at
about 1.7 ms a record; this is a few tens of microseconds.) It answers only for the plain case (one storage, little-endian,
contiguous from element 0, exactly as many bytes as the tensor) and None otherwise, so anything unusual goes to
torch.load as in the stock reader.
"""

from __future__ import annotations

import io
import math
import pickle
import struct
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import torch

_LOCAL_HEADER = struct.Struct("<IHHHHHIIIHH")  # zip local file header, 30 bytes
_LOCAL_SIGNATURE = 0x04034B50
# The entries before data/0 and the central directory after it are a few hundred bytes each.
HEAD_BYTES = 4096


@dataclass(frozen=True)
class TensorLayout:
    dtype: torch.dtype
    storage_numel: int
    storage_offset: int
    size: tuple[int, ...]
    stride: tuple[int, ...]

    def is_plain(self) -> bool:
        """Contiguous from the storage's first element, and the storage holds nothing else."""
        numel = math.prod(self.size)
        expected, step = [], 1
        for extent in reversed(self.size):
            expected.append(step)
            step *= max(extent, 1)
        contiguous = numel <= 1 or all(
            s == e for s, e, n in zip(self.stride, reversed(expected), self.size, strict=True) if n > 1
        )
        return self.storage_offset == 0 and self.storage_numel == numel and contiguous


@dataclass(frozen=True)
class DataSpan:
    """data/0's bytes start `offset` bytes into the record and run for `nbytes`."""

    offset: int
    nbytes: int
    layout: TensorLayout


# The legacy typed-storage names data.pkl refers to (torch.FloatStorage, ...), by the dtype they stand for.
_STORAGE_DTYPES: dict[str, torch.dtype] = {
    f"{name}Storage": dtype
    for name, dtype in {
        "Float": torch.float32, "Double": torch.float64, "Half": torch.float16, "BFloat16": torch.bfloat16,
        "Long": torch.int64, "Int": torch.int32, "Short": torch.int16, "Char": torch.int8, "Byte": torch.uint8,
        "Bool": torch.bool, "ComplexFloat": torch.complex64, "ComplexDouble": torch.complex128,
    }.items()
}  # fmt: skip


class _Storage:
    def __init__(self, dtype: torch.dtype, numel: int) -> None:
        self.dtype, self.numel = dtype, numel


class _LayoutUnpickler(pickle.Unpickler):
    """Rebuilds nothing: returns the TensorLayout torch._utils._rebuild_tensor_v2 would be called with."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return _layout
        if (module, name) == ("collections", "OrderedDict"):
            return OrderedDict
        if module == "torch" and name.endswith("Storage") and name in _STORAGE_DTYPES:
            return _STORAGE_DTYPES[name]
        raise pickle.UnpicklingError(f"{module}.{name} is not part of a plain tensor record")

    def persistent_load(self, pid: Any) -> _Storage:
        kind, dtype, key, _location, numel = pid
        if kind != "storage" or key != "0" or not isinstance(dtype, torch.dtype):
            raise pickle.UnpicklingError(f"storage {pid!r} is not the record's only storage")
        return _Storage(dtype, int(numel))


def _layout(storage: _Storage, offset: int, size: Any, stride: Any, *_: Any) -> TensorLayout:
    return TensorLayout(storage.dtype, storage.numel, int(offset), tuple(size), tuple(stride))


_CENTRAL_HEADER = struct.Struct("<IHHHHHHIIIHHHHHII")  # zip central directory entry, 46 bytes
_CENTRAL_SIGNATURE = 0x02014B50
_END_SIGNATURE = 0x06054B50
_END = struct.Struct("<IHHHHIIH")  # end of central directory, 22 bytes (torch writes no comment)
_ZIP64_LOCATOR = struct.Struct("<IIQI")  # 20 bytes, just before the end record
_ZIP64_END = struct.Struct("<IQHHIIQQQQ")  # 56 bytes
_UNKNOWN32 = 0xFFFFFFFF


@dataclass(frozen=True)
class _Entry:
    header_offset: int
    size: int
    crc: int
    method: int


def _central_directory(tail: bytes, length: int) -> dict[str, _Entry] | None:
    """name -> entry, read from the end of a record of `length` bytes whose last bytes are `tail`."""
    tail_start = length - len(tail)
    if len(tail) < _END.size:
        return None
    end = _END.unpack_from(tail, len(tail) - _END.size)
    if end[0] != _END_SIGNATURE:
        return None
    count, cd_size, cd_offset = end[4], end[5], end[6]
    if cd_offset == _UNKNOWN32 or count == 0xFFFF:
        locator_at = len(tail) - _END.size - _ZIP64_LOCATOR.size
        if locator_at < 0:
            return None
        zip64_end_offset = _ZIP64_LOCATOR.unpack_from(tail, locator_at)[2] - tail_start
        if not 0 <= zip64_end_offset <= len(tail) - _ZIP64_END.size:
            return None
        zip64 = _ZIP64_END.unpack_from(tail, zip64_end_offset)
        count, cd_size, cd_offset = zip64[7], zip64[8], zip64[9]
    position = cd_offset - tail_start
    if position < 0 or position + cd_size > len(tail):
        return None
    entries: dict[str, _Entry] = {}
    for _ in range(count):
        if position + _CENTRAL_HEADER.size > len(tail):
            return None
        fields = _CENTRAL_HEADER.unpack_from(tail, position)
        if fields[0] != _CENTRAL_SIGNATURE:
            return None
        method, crc, size, name_length = fields[4], fields[7], fields[8], fields[10]
        extra_length, comment_length, header_offset = fields[11], fields[12], fields[16]
        name_start = position + _CENTRAL_HEADER.size
        name = tail[name_start : name_start + name_length].decode("utf-8", "replace")
        if _UNKNOWN32 in (size, header_offset):
            return None  # a zip64 entry (a storage over 4 GiB): left to torch.load
        entries[name.split("/", 1)[-1]] = _Entry(header_offset, size, crc, method)
        position = name_start + name_length + extra_length + comment_length
    return entries


def _data_start(head: bytes, entry: _Entry) -> int | None:
    if entry.header_offset + _LOCAL_HEADER.size > len(head):
        return None
    fields = _LOCAL_HEADER.unpack_from(head, entry.header_offset)
    if fields[0] != _LOCAL_SIGNATURE:
        return None
    return entry.header_offset + _LOCAL_HEADER.size + fields[9] + fields[10]


def _small_entry(head: bytes, entry: _Entry | None) -> bytes | None:
    """The content of a small stored entry in the head, checked against its CRC."""
    if entry is None or entry.method != 0:
        return None
    start = _data_start(head, entry)
    if start is None or start + entry.size > len(head):
        return None
    content = head[start : start + entry.size]
    return content if zlib.crc32(content) == entry.crc else None


def tensor_data_span(head: bytes, tail: bytes, length: int) -> DataSpan | None:
    """The span of data/0 in a record of `length` bytes starting with `head` and ending with `tail`, or None when
    the fast path must not apply."""
    entries = _central_directory(tail, length)
    if entries is None or "data/0" not in entries or entries["data/0"].method != 0:
        return None
    if _small_entry(head, entries.get("byteorder")) != b"little":
        return None
    pickled = _small_entry(head, entries.get("data.pkl"))
    if pickled is None:
        return None
    try:
        found = _LayoutUnpickler(io.BytesIO(pickled)).load()
    except (pickle.UnpicklingError, ValueError, TypeError, EOFError, AttributeError, IndexError, KeyError):
        return None
    data = entries["data/0"]
    if not isinstance(found, TensorLayout) or not found.is_plain():
        return None
    if data.size != found.storage_numel * found.dtype.itemsize:
        return None
    start = _data_start(head, data)
    if start is None or start + data.size > length:
        return None
    return DataSpan(start, data.size, found)
