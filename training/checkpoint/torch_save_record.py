"""Where a tensor's bytes sit inside one `torch.save` record, so a reader can copy them straight into place.

DCP's stock format stores every tensor as its own `torch.save` zip archive inside the rank's file: small entries
(`data.pkl`, `byteorder`, ...), then `data/0`, the storage bytes stored uncompressed, then the central directory.
`tensor_data_span` is given the first and last few KiB of such a record; Python's zipfile reads the central
directory from the tail and the small entries from the head (checking their CRCs), and a restricted unpickler
records the tensor's layout from data.pkl. It answers only for the plain case (one storage, little-endian,
contiguous from element 0, exactly as many bytes as the tensor) and None otherwise, so anything unusual goes to
torch.load as in the stock reader.
"""

from __future__ import annotations

import io
import math
import pickle
import struct
import zipfile
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


class _HeadAndTail(io.RawIOBase):
    """A record of `length` bytes of which only the first and last bytes are known; reading elsewhere fails."""

    def __init__(self, head: bytes, tail: bytes, length: int) -> None:
        super().__init__()
        self.head, self.tail, self.length, self.position = head, tail, length, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.length}[whence]
        self.position = base + offset
        return self.position

    def tell(self) -> int:
        return self.position

    def readinto(self, buffer: Any) -> int:
        want = min(len(buffer), self.length - self.position)
        if want <= 0:
            return 0
        tail_start = self.length - len(self.tail)
        if self.position + want <= len(self.head):
            chunk = self.head[self.position : self.position + want]
        elif self.position >= tail_start:
            chunk = self.tail[self.position - tail_start : self.position - tail_start + want]
        else:
            raise OSError(f"bytes {self.position}..{self.position + want} of the record were not read")
        buffer[: len(chunk)] = chunk
        self.position += len(chunk)
        return len(chunk)


def _entry(archive: zipfile.ZipFile, suffix: str) -> zipfile.ZipInfo | None:
    found = [info for info in archive.infolist() if info.filename.endswith(suffix)]
    return found[0] if len(found) == 1 else None


def tensor_data_span(head: bytes, tail: bytes, length: int) -> DataSpan | None:
    """The span of data/0 in a record of `length` bytes starting with `head` and ending with `tail`, or None when
    the fast path must not apply."""
    try:
        with zipfile.ZipFile(_HeadAndTail(head, tail, length)) as archive:
            data, pickled, byteorder = (_entry(archive, name) for name in ("/data/0", "/data.pkl", "/byteorder"))
            if data is None or pickled is None or byteorder is None or data.compress_type != zipfile.ZIP_STORED:
                return None
            if archive.read(byteorder) != b"little":
                return None
            found = _LayoutUnpickler(io.BytesIO(archive.read(pickled))).load()
    except (zipfile.BadZipFile, OSError, pickle.UnpicklingError, ValueError, TypeError, EOFError, AttributeError):
        return None
    if not isinstance(found, TensorLayout) or not found.is_plain():
        return None
    if data.file_size != found.storage_numel * found.dtype.itemsize:
        return None
    header = data.header_offset
    if header + _LOCAL_HEADER.size > len(head):
        return None
    fields = _LOCAL_HEADER.unpack_from(head, header)
    if fields[0] != _LOCAL_SIGNATURE:
        return None
    start = header + _LOCAL_HEADER.size + fields[9] + fields[10]
    if start + data.file_size > length:
        return None
    return DataSpan(start, data.file_size, found)
