"""DCP storage that moves tensor bytes straight between tensor memory and the checkpoint files.

The stock FileSystemWriter wraps every tensor in its own `torch.save` zip record and its reader `torch.load`s
each record into a new tensor before copying it into the model: an extra pass over every byte, and as much
freshly allocated memory as the checkpoint is large, both ways. Here each rank writes one file of its
tensors' raw bytes through direct_io.DirectWriter and reads it back with direct_io.read_ranges straight into
the destination tensors whenever the saved chunk and the destination line up, which they do whenever the
world size is unchanged. Resharding takes the general path (read the chunk, narrow it, copy).

Everything else is DCP's: plans, the `.metadata` file, resharding, async staging. Each entry's storage info
carries FORMAT in its transform descriptors, so the stock reader refuses these files with "unknown extension"
instead of misreading them, and TensorFileReader still reads checkpoints written by the stock writer.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterable
from functools import partial
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

from training.checkpoint.direct_io import DirectWriter, read_ranges

FORMAT = "tensor-bytes@llm-training/1"


def tensor_bytes(tensor: torch.Tensor) -> memoryview:
    """The bytes of a contiguous CPU tensor, without a copy (any dtype, bfloat16 included)."""
    return memoryview(tensor.reshape(-1).view(torch.uint8).numpy())


class TensorFileWriter(FileSystemWriter):
    """One file per rank: BYTE_IO records as they are, tensors as their raw bytes; fsync before returning."""

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
        with DirectWriter(path, sync=self.sync_files) as stream:
            for item in items:
                if item.type == WriteItemType.BYTE_IO:
                    data = planner.resolve_data(item)
                    assert isinstance(data, io.BytesIO)
                    results.append(_write_record(stream, file_name, item, data.getbuffer()))
            tensors = [item for item in items if item.type != WriteItemType.BYTE_IO]
            for tensor, item in self._cpu_tensors(tensors, planner):
                if not tensor.is_contiguous():
                    tensor = tensor.contiguous()
                results.append(_write_record(stream, file_name, item, tensor_bytes(tensor)))
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


def _write_record(stream: DirectWriter, file_name: str, item: WriteItem, data: memoryview) -> WriteResult:
    offset = stream.tell()
    stream.write(data)
    return WriteResult(
        index=item.index,
        size_in_bytes=data.nbytes,
        storage_data=_StorageInfo(file_name, offset, data.nbytes, transform_descriptors=[FORMAT]),
    )


class TensorFileReader(FileSystemReader):
    """Reads TensorFileWriter's files (into the destination tensors where possible) and stock DCP files."""

    def set_up_storage_reader(self, metadata: Metadata, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        super().set_up_storage_reader(metadata, is_coordinator, *args, **kwargs)
        self._chunks: dict[MetadataIndex, tuple[torch.dtype, torch.Size]] = {}
        for fqn, entry in metadata.state_dict_metadata.items():
            if isinstance(entry, TensorStorageMetadata):
                for chunk in entry.chunks:
                    self._chunks[MetadataIndex(fqn, chunk.offsets)] = (entry.properties.dtype, chunk.sizes)

    def read_data(self, plan: LoadPlan, planner: LoadPlanner) -> Future[None]:
        ours: list[ReadItem] = []
        stock: list[ReadItem] = []
        for item in plan.items:
            (ours if self._is_ours(item) else stock).append(item)
        if stock:
            super().read_data(LoadPlan(stock, plan.storage_data, plan.planner_data), planner).wait()
        by_file: dict[str, list[ReadItem]] = {}
        for item in ours:
            by_file.setdefault(self.storage_data[item.storage_index].relative_path, []).append(item)
        for relative_path, items in by_file.items():
            self._read_file(relative_path, items, planner)
        future: Future[None] = Future()
        future.set_result(None)
        return future

    def _is_ours(self, item: ReadItem) -> bool:
        descriptors = self.storage_data[item.storage_index].transform_descriptors or ()
        return list(descriptors) == [FORMAT]

    def _read_file(self, relative_path: str, items: list[ReadItem], planner: LoadPlanner) -> None:
        """Read every record of one file in one pass, then hand each to the planner in plan order."""
        ranges: list[tuple[int, memoryview]] = []
        finish: list[Callable[[], None]] = []
        for item in items:
            info: _StorageInfo = self.storage_data[item.storage_index]
            if item.type == LoadItemType.BYTE_IO:
                buffer = bytearray(info.length)
                ranges.append((info.offset, memoryview(buffer)))
                finish.append(partial(_load_bytes, planner, item, buffer))
                continue
            dtype, sizes = self._chunks[item.storage_index]
            target = planner.resolve_tensor(item).detach()
            whole_chunk = all(offset == 0 for offset in item.storage_offsets) and tuple(item.lengths) == tuple(sizes)
            if whole_chunk and target.dtype == dtype and target.is_cpu and target.is_contiguous():
                into = target  # the common case: the bytes land in the model or optimizer state directly
            else:
                into = torch.empty(sizes, dtype=dtype)
                finish.append(partial(_copy_narrowed, target, into, item))
            view = tensor_bytes(into)
            if view.nbytes != info.length:
                raise ValueError(
                    f"{relative_path}: record of {item.storage_index.fqn} at byte {info.offset} holds "
                    f"{info.length} bytes, its metadata says {view.nbytes}"
                )
            ranges.append((info.offset, view))
            finish.append(partial(planner.commit_tensor, item, target))
        read_ranges(self.fs.concat_path(self.path, relative_path), ranges)
        for step in finish:
            step()


def _load_bytes(planner: LoadPlanner, item: ReadItem, buffer: bytearray) -> None:
    planner.load_bytes(item, io.BytesIO(buffer))  # BytesIO copies its argument: made after the read, not before


def _copy_narrowed(target: torch.Tensor, saved: torch.Tensor, item: ReadItem) -> None:
    target.copy_(narrow_tensor_by_index(saved, item.storage_offsets, item.lengths))
