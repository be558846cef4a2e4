"""Where a tensor's bytes sit inside one `torch.save` record, so a reader can copy them straight into place.

DCP's stock format stores every tensor as its own `torch.save` zip archive inside the rank's file: small entries
(`data.pkl`, `byteorder`, ...), then `data/0`, the storage bytes stored uncompressed, then the central directory.
`tensor_data_span` is given the first few KiB of such a record: it walks the small entries (checking each against
the size and, where one was computed, the CRC-32 torch writes after it) up to data/0's header, and a restricted unpickler records the tensor's
layout from data.pkl. One small read per record, a few tens of microseconds to parse. It answers only for the plain case (one storage, little-endian,
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


_DESCRIPTOR = struct.Struct("<IIII")  # data descriptor after each entry: signature, CRC-32, sizes (32-bit)
_DESCRIPTOR_SIGNATURE = 0x08074B50


def _entries(head: bytes) -> tuple[bytes | None, bytes | None, int | None]:
    """(data.pkl, byteorder, start of data/0) from the local entries at the start of a record. torch writes each
    entry's sizes in a descriptor after its data, so a small entry ends where its descriptor is found, and the
    descriptor's CRC-32 and sizes must match what lies before it."""
    pickled = byteorder = None
    position = 0
    while position + _LOCAL_HEADER.size <= len(head):
        fields = _LOCAL_HEADER.unpack_from(head, position)
        if fields[0] != _LOCAL_SIGNATURE or fields[3] != 0:  # stored (uncompressed) entries only
            return None, None, None
        name_start = position + _LOCAL_HEADER.size
        name = head[name_start : name_start + fields[9]].decode("utf-8", "replace").split("/", 1)[-1]
        start = name_start + fields[9] + fields[10]
        if name == "data/0":
            return pickled, byteorder, start
        end = head.find(b"PK\x07\x08", start)
        if end < 0 or end + _DESCRIPTOR.size > len(head):
            return None, None, None
        _, crc, compressed, size = _DESCRIPTOR.unpack_from(head, end)
        content = head[start:end]
        if compressed != size or size != len(content) or crc not in (0, zlib.crc32(content)):  # 0: not computed
            return None, None, None
        if name == "data.pkl":
            pickled = content
        elif name == "byteorder":
            byteorder = content
        position = end + _DESCRIPTOR.size
    return None, None, None


def tensor_data_span(head: bytes, length: int) -> DataSpan | None:
    """The span of data/0 in a record of `length` bytes whose first bytes are `head`, or None when the fast path
    must not apply."""
    pickled, byteorder, start = _entries(head)
    if pickled is None or byteorder != b"little" or start is None:
        return None
    try:
        found = _LayoutUnpickler(io.BytesIO(pickled)).load()
    except (pickle.UnpicklingError, ValueError, TypeError, EOFError, AttributeError, IndexError, KeyError):
        return None
    if not isinstance(found, TensorLayout) or not found.is_plain():
        return None
    size = found.storage_numel * found.dtype.itemsize
    if start + size + _DESCRIPTOR.size > length:
        return None
    return DataSpan(start, size, found)
