"""DCP storage in torch's stock format, written and read without extra copies or a polluted page cache.

The files are exactly what DCP's stock FileSystemWriter writes: one file per rank, BYTE_IO records as they are and
every tensor as its own `torch.save` record, with no transform descriptors, so torch's stock FileSystemReader,
`torch.distributed.checkpoint.format_utils` and torchtitan read them. What differs is how the bytes move:

- Writing: `torch.save` hands the tensor's storage to the file object as a memoryview, and the file object here is
  file_io.StreamingWriter (pwrite straight from that memory, writeback started as the file grows, fsync at close,
  then the pages dropped from the cache).
- Reading: the stock reader `torch.load`s every record into a fresh tensor and copies it into the model (an
  extra pass over every byte and as much new memory as the checkpoint). Here file_io.read_records reads the
  first block of each tensor record to find where its storage bytes sit (torch_save_record.py), then the bytes
  themselves, straight into the destination tensor, whenever the saved chunk and the destination line up, which
  they do whenever the world size is unchanged. Resharding reads the chunk into a temporary tensor, narrows and copies;
  a record of any other shape goes to the stock reader's path.

Checkpoints of the earlier raw-bytes layout (storage entries marked LEGACY_FORMAT) are still read.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch.distributed._shard._utils import narrow_tensor_by_index
from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter
from torch.distributed.checkpoint.filesystem import (
    DEFAULT_SUFFIX,
    _item_size,
    _OverlappingCpuLoader,
    _SerialCpuLoader,
    _StorageInfo,
    _StoragePrefix,
)
from torch.distributed.checkpoint.metadata import Metadata, MetadataIndex, TensorStorageMetadata
from torch.distributed.checkpoint.planner import (
    LoadItemType,
    LoadPlan,
    LoadPlanner,
    ReadItem,
    SavePlan,
    SavePlanner,
    WriteItem,
    WriteItemType,
)
from torch.distributed.checkpoint.storage import WriteResult
from torch.futures import Future

from training.checkpoint.file_io import (
    Placement,
    Prefetch,
    Record,
    StreamingWriter,
    check_file_holds,
    fixed,
    read_records,
)
from training.checkpoint.torch_save_record import HEAD_BYTES, tensor_data_span

# Entries of the raw-bytes layout this storage wrote before it wrote the stock format; read, never written.
LEGACY_FORMAT = "tensor-bytes@llm-training/1"


def tensor_bytes(tensor: torch.Tensor) -> memoryview:
    """The bytes of a contiguous CPU tensor, without a copy (any dtype, bfloat16 included)."""
    return tensor.reshape(-1).view(torch.uint8).numpy().data


class TensorFileWriter(FileSystemWriter):
    """One file per rank in the stock format (BYTE_IO records as they are, tensors as torch.save records) through
    file_io.StreamingWriter; fsync before returning."""

    def __init__(self, path: str | os.PathLike, sync_files: bool = True) -> None:
        super().__init__(path, single_file_per_rank=True, sync_files=sync_files, thread_count=1)

    def write_data(self, plan: SavePlan, planner: SavePlanner) -> Future[list[WriteResult]]:
        prefix: _StoragePrefix = plan.storage_data
        file_name = f"{prefix.prefix}0{DEFAULT_SUFFIX}"
        results = self._write_file(self.fs.concat_path(self.path, file_name), file_name, plan.items, planner)
        future: Future[list[WriteResult]] = Future()
        future.set_result(results)
        return future

    def _write_file(
        self, path: str | os.PathLike, file_name: str, items: list[WriteItem], planner: SavePlanner
    ) -> list[WriteResult]:
        results: list[WriteResult] = []
        with StreamingWriter(path, sync=self.sync_files) as stream:
            for item in items:
                if item.type == WriteItemType.BYTE_IO:
                    data = planner.resolve_data(item)
                    assert isinstance(data, io.BytesIO)
                    results.append(_write_record(stream, file_name, item, data.getbuffer()))
            tensors = [item for item in items if item.type != WriteItemType.BYTE_IO]
            for tensor, item in self._cpu_tensors(tensors, planner):
                results.append(_write_tensor(stream, file_name, item, tensor))
        return results

    def _cpu_tensors(self, items: list[WriteItem], planner: SavePlanner) -> Iterable[tuple[torch.Tensor, WriteItem]]:
        """Tensors in plan order, on the CPU; device copies run ahead of the writes (DCP's own loaders)."""
        if torch.cuda.is_available() and self.per_thread_copy_ahead > 0:
            loader: Any = _OverlappingCpuLoader(planner.resolve_data, inflight_threshhold=self.per_thread_copy_ahead)
        else:
            loader = _SerialCpuLoader(planner.resolve_data)
        for item in items:
            loader.add(_item_size(item), item)
        loader.start_loading()
        return loader.values()


def _write_record(stream: StreamingWriter, file_name: str, item: WriteItem, data: memoryview) -> WriteResult:
    offset = stream.tell()
    stream.write(data)
    return WriteResult(
        index=item.index, size_in_bytes=data.nbytes, storage_data=_StorageInfo(file_name, offset, data.nbytes)
    )


def _write_tensor(stream: StreamingWriter, file_name: str, item: WriteItem, tensor: torch.Tensor) -> WriteResult:
    """One torch.save record; a view (an FSDP shard of a padded buffer) is copied out first, so the record holds
    the tensor's bytes only and the reader's fast path applies."""
    whole = tensor.untyped_storage().nbytes() == tensor.numel() * tensor.element_size()
    if not (tensor.is_contiguous() and tensor.storage_offset() == 0 and whole):
        tensor = tensor.clone(memory_format=torch.contiguous_format)
    offset = stream.tell()
    computing = torch.serialization.get_crc32_options()
    torch.serialization.set_crc32_options(False)
    try:
        # No CRC-32 over the tensor bytes (a second pass over every byte, as torch.save allows); torch.load does
        # not need it, and our reader checks the small entries' CRCs where written.
        torch.save(tensor, stream)  # type: ignore[arg-type]  # a file object: write(memoryview) is all it needs
    finally:
        torch.serialization.set_crc32_options(computing)
    length = stream.tell() - offset
    return WriteResult(index=item.index, size_in_bytes=length, storage_data=_StorageInfo(file_name, offset, length))


class TensorFileReader(FileSystemReader):
    """Reads stock-format DCP files (ours or the stock writer's) into the destination tensors where possible.

    Given the loading rank, it starts pulling that rank's own files (DCP names them `__<rank>_*.distcp`) into the
    page cache at once, so the device works while DCP plans; the prefetch ends when the reads begin. After a
    change of world size a rank may need other files as well: they are read as usual."""

    def __init__(self, path: str | os.PathLike, rank: int | None = None) -> None:
        super().__init__(path)
        own_files = sorted(Path(path).glob(f"__{rank}_*{DEFAULT_SUFFIX}")) if rank is not None else []
        self._prefetch = Prefetch(own_files) if own_files else None

    def stop_prefetch(self) -> None:
        if self._prefetch is not None:
            self._prefetch.stop()

    def set_up_storage_reader(self, metadata: Metadata, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        super().set_up_storage_reader(metadata, is_coordinator, *args, **kwargs)
        self._chunks: dict[MetadataIndex, tuple[torch.dtype, torch.Size]] = {}
        for fqn, entry in metadata.state_dict_metadata.items():
            if isinstance(entry, TensorStorageMetadata):
                for chunk in entry.chunks:
                    self._chunks[MetadataIndex(fqn, chunk.offsets)] = (entry.properties.dtype, chunk.sizes)
        self._file_ends: dict[str, int] = {}
        for info in self.storage_data.values():
            end = info.offset + info.length
            self._file_ends[info.relative_path] = max(end, self._file_ends.get(info.relative_path, 0))

    def read_data(self, plan: LoadPlan, planner: LoadPlanner) -> Future[None]:
        by_file: dict[str, list[ReadItem]] = {}
        for item in plan.items:
            by_file.setdefault(self.storage_data[item.storage_index].relative_path, []).append(item)
        stock: list[ReadItem] = []
        for relative_path, items in by_file.items():
            stock += self._read_file(relative_path, items, planner)
        if stock:
            super().read_data(LoadPlan(stock, plan.storage_data, plan.planner_data), planner).wait()
        future: Future[None] = Future()
        future.set_result(None)
        return future

    def _read_file(self, relative_path: str, items: list[ReadItem], planner: LoadPlanner) -> list[ReadItem]:
        """Read the records of one file in one pass and hand each to the planner in plan order; return the items
        left to the stock path."""
        path = self.fs.concat_path(self.path, relative_path)
        # Only payloads are read below: a file cut short anywhere (a zip tail) must still fail the load.
        check_file_holds(path, os.stat(path).st_size, self._file_ends[relative_path])
        records: list[Record] = []
        finishes: list[list[Callable[[], None]]] = []
        readable: list[ReadItem] = []
        stock: list[ReadItem] = []
        for item in items:
            info: _StorageInfo = self.storage_data[item.storage_index]
            if item.type == LoadItemType.BYTE_IO:
                buffer = bytearray(info.length)
                records.append(Record(info.offset, info.length, fixed(buffer)))
                finishes.append([partial(_load_bytes, planner, item, buffer)])
                readable.append(item)
                continue
            if info.transform_descriptors and not _is_legacy(info):
                stock.append(item)
                continue
            dtype, sizes = self._chunks[item.storage_index]
            target = planner.resolve_tensor(item).detach()
            whole_chunk = all(offset == 0 for offset in item.storage_offsets) and tuple(item.lengths) == tuple(sizes)
            finish: list[Callable[[], None]] = []
            if whole_chunk and target.dtype == dtype and target.is_cpu and target.is_contiguous():
                into = target  # the common case: the bytes land in the model or optimizer state directly
            else:
                # A GPU destination gets its bytes through pinned memory, copied without blocking the host.
                into = torch.empty(sizes, dtype=dtype, pin_memory=target.is_cuda)
                finish.append(partial(_copy_narrowed, target, into, item))
            view = tensor_bytes(into)
            if _is_legacy(info):
                if view.nbytes != info.length:
                    raise ValueError(
                        f"{relative_path}: record of {item.storage_index.fqn} at byte {info.offset} holds "
                        f"{info.length} bytes, its metadata says {view.nbytes}"
                    )
                records.append(Record(info.offset, info.length, fixed(view)))
            else:
                place = partial(_place_tensor, dtype, tuple(sizes), view, info.length)
                records.append(Record(info.offset, info.length, place, head_bytes=HEAD_BYTES))
            finishes.append([*finish, partial(planner.commit_tensor, item, target)])
            readable.append(item)
        self.stop_prefetch()  # the reads take the device from here; what it fetched is in the cache
        placed = read_records(path, records)
        for item, was_placed, finish in zip(readable, placed, finishes, strict=True):
            if not was_placed:
                stock.append(item)  # a record of another shape: torch.load reads it
                continue
            for step in finish:
                step()
        if torch.cuda.is_available():
            torch.cuda.synchronize()  # the asynchronous copies out of pinned buffers end before the buffers do
        return stock


def _place_tensor(
    dtype: torch.dtype, sizes: tuple[int, ...], into: memoryview, length: int, head: bytes
) -> Placement | None:
    """Where a torch.save record's tensor bytes sit, if the saved tensor is exactly the chunk `into` holds."""
    span = tensor_data_span(head, length)
    if span is None or span.layout.dtype != dtype or span.layout.size != sizes or span.nbytes != into.nbytes:
        return None
    return Placement(span.offset, into)


def _is_legacy(info: _StorageInfo) -> bool:
    return list(info.transform_descriptors or ()) == [LEGACY_FORMAT]


def _load_bytes(planner: LoadPlanner, item: ReadItem, buffer: bytearray) -> None:
    planner.load_bytes(item, io.BytesIO(buffer))  # BytesIO copies its argument: made after the read, not before


def _copy_narrowed(target: torch.Tensor, saved: torch.Tensor, item: ReadItem) -> None:
    target.copy_(narrow_tensor_by_index(saved, item.storage_offsets, item.lengths), non_blocking=saved.is_pinned())
