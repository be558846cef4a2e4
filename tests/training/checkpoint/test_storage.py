import io
import os
import re
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import DefaultLoadPlanner, FileSystemReader, FileSystemWriter
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
from torch.distributed.checkpoint.metadata import MetadataIndex
from torch.distributed.checkpoint.planner import LoadItemType, LoadPlan, ReadItem

from training.checkpoint import storage
from training.checkpoint.file_io import Prefetch
from training.checkpoint.storage import LEGACY_FORMAT, TensorFileReader, TensorFileWriter

pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled, unavailable or uninitialized")


def _state() -> dict[str, Any]:
    generator = torch.Generator().manual_seed(0)
    return {
        "weight": torch.randn(5, 7, generator=generator),
        "half": torch.randn(3, 33, generator=generator).to(torch.bfloat16),
        "counts": torch.arange(11, dtype=torch.int64) * (2**40 + 3) - 7,
        "scalar": torch.tensor(2.5),
        "transposed": torch.arange(12, dtype=torch.float32).reshape(3, 4).t(),
        "empty": torch.empty(0, 4),
        "trainer": {"step": 17, "name": "run-a", "lrs": [0.1, 0.01]},
    }


def _blank(state: dict[str, Any]) -> dict[str, Any]:
    """A destination of the same shapes and dtypes with different values (contiguous tensors)."""
    return {
        key: torch.zeros(value.shape, dtype=value.dtype)
        if isinstance(value, torch.Tensor)
        else {"step": 0, "name": "", "lrs": []}
        for key, value in state.items()
    }


def _assert_same(loaded: dict[str, Any], expected: dict[str, Any]) -> None:
    assert loaded.keys() == expected.keys()
    for key, value in expected.items():
        if isinstance(value, torch.Tensor):
            assert loaded[key].dtype == value.dtype, key
            assert torch.equal(loaded[key], value), key
        else:
            assert loaded[key] == value, key


def _spy_copies(monkeypatch: pytest.MonkeyPatch) -> list[torch.Tensor]:
    """The destinations that took the narrow-and-copy path (rather than receiving the bytes directly)."""
    copied: list[torch.Tensor] = []
    copy = storage._copy_narrowed

    def spy(target: torch.Tensor, saved: torch.Tensor, item: ReadItem) -> None:
        copied.append(target)
        copy(target, saved, item)

    monkeypatch.setattr(storage, "_copy_narrowed", spy)
    return copied


def test_round_trip_keeps_values_and_dtypes_and_reads_straight_into_the_tensors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = _state()
    dcp.save(state, storage_writer=TensorFileWriter(tmp_path), no_dist=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".metadata", "__0_0.distcp"]

    copied = _spy_copies(monkeypatch)
    target = _blank(state)
    destinations = {key: value for key, value in target.items() if isinstance(value, torch.Tensor)}
    dcp.load(target, storage_reader=TensorFileReader(tmp_path), no_dist=True)
    _assert_same(target, state)
    assert copied == []
    for key, tensor in destinations.items():
        assert target[key] is tensor, key  # loaded in place


def _spy_stock_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The fqns of the items our reader leaves to the stock reader's torch.load path."""
    stock: list[str] = []
    read = FileSystemReader.read_data

    def spy(self: FileSystemReader, plan: LoadPlan, planner: Any) -> Any:
        stock.extend(item.storage_index.fqn for item in plan.items)
        return read(self, plan, planner)

    monkeypatch.setattr(FileSystemReader, "read_data", spy)
    return stock


def test_entries_are_stock_torch_save_records_packed_in_one_file(tmp_path: Path) -> None:
    state = _state()
    dcp.save(state, storage_writer=TensorFileWriter(tmp_path), no_dist=True)
    entries = FileSystemReader(tmp_path).read_metadata().storage_data
    assert {index.fqn for index in entries} == {
        "weight", "half", "counts", "scalar", "transposed", "empty", "trainer.step", "trainer.name", "trainer.lrs",
    }  # fmt: skip
    for index, info in entries.items():
        assert info.transform_descriptors is None, index  # as the stock writer leaves it: no extension needed
        assert info.relative_path == "__0_0.distcp", index
    data = (tmp_path / "__0_0.distcp").read_bytes()
    assert sum(info.length for info in entries.values()) == len(data)  # packed: no padding, no gaps
    for index, info in entries.items():
        if index.fqn.startswith("trainer."):
            continue
        record = torch.load(io.BytesIO(data[info.offset : info.offset + info.length]), weights_only=True)
        assert record.dtype == state[index.fqn].dtype and torch.equal(record, state[index.fqn]), index.fqn
        assert record.is_contiguous(), index.fqn


def test_the_stock_reader_and_format_utils_read_our_files(tmp_path: Path) -> None:
    state = _state()
    dcp.save(state, storage_writer=TensorFileWriter(tmp_path / "ckpt"), no_dist=True)
    target = _blank(state)
    dcp.load(target, storage_reader=FileSystemReader(tmp_path / "ckpt"), no_dist=True)
    _assert_same(target, state)
    dcp_to_torch_save(tmp_path / "ckpt", tmp_path / "converted.pt")
    converted = torch.load(tmp_path / "converted.pt", weights_only=True)
    _assert_same({key: converted[key] for key in state}, state)


@pytest.mark.parametrize("writer", [TensorFileWriter, FileSystemWriter], ids=["ours", "stock"])
def test_our_reader_reads_stock_records_straight_into_the_tensors(
    writer: type, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = {key: value for key, value in _state().items() if key != "transposed"}
    dcp.save(state, storage_writer=writer(tmp_path), no_dist=True)
    copied, stock = _spy_copies(monkeypatch), _spy_stock_reads(monkeypatch)
    target = _blank(state)
    dcp.load(target, storage_reader=TensorFileReader(tmp_path), no_dist=True)
    _assert_same(target, state)
    assert (copied, stock) == ([], [])


def test_a_record_of_a_strided_tensor_goes_to_the_stock_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stock writer saves a transposed tensor with its strides; its bytes are not in row-major order."""
    state = {"transposed": torch.arange(12, dtype=torch.float32).reshape(3, 4).t()}
    dcp.save(state, storage_writer=FileSystemWriter(tmp_path), no_dist=True)
    stock = _spy_stock_reads(monkeypatch)
    target = _blank(state)
    dcp.load(target, storage_reader=TensorFileReader(tmp_path), no_dist=True)
    _assert_same(target, state)
    assert stock == ["transposed"]


def _write_legacy_tensor(stream: Any, file_name: str, item: Any, tensor: torch.Tensor) -> Any:
    """The earlier layout: the tensor's raw bytes, marked with the legacy descriptor."""
    result = storage._write_record(stream, file_name, item, storage.tensor_bytes(tensor.contiguous()))
    result.storage_data.transform_descriptors = [LEGACY_FORMAT]
    return result


def test_checkpoints_of_the_earlier_raw_bytes_layout_still_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(storage, "_write_tensor", _write_legacy_tensor)
    state = _state()
    dcp.save(state, storage_writer=TensorFileWriter(tmp_path), no_dist=True)
    monkeypatch.undo()
    entries = FileSystemReader(tmp_path).read_metadata().storage_data
    assert {info.transform_descriptors[0] for i, info in entries.items() if not i.fqn.startswith("trainer.")} == {
        LEGACY_FORMAT
    }
    target = _blank(state)
    dcp.load(target, storage_reader=TensorFileReader(tmp_path), no_dist=True)
    _assert_same(target, state)


def test_a_non_contiguous_destination_takes_the_copy_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    saved = torch.arange(20, dtype=torch.float32).reshape(4, 5)
    dcp.save({"w": saved, "v": saved + 100}, storage_writer=TensorFileWriter(tmp_path), no_dist=True)
    copied = _spy_copies(monkeypatch)
    backing = torch.zeros(5, 4)
    into = backing.t()  # (4, 5), not contiguous
    direct = torch.zeros(4, 5)
    dcp.load({"w": into, "v": direct}, storage_reader=TensorFileReader(tmp_path), no_dist=True)
    assert torch.equal(into, saved)
    assert torch.equal(backing, saved.t())
    assert torch.equal(direct, saved + 100)
    assert [(tensor.data_ptr(), tensor.stride()) for tensor in copied] == [(into.data_ptr(), into.stride())]


def test_a_destination_of_another_dtype_takes_the_copy_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    saved = torch.arange(-6, 6, dtype=torch.int64).reshape(3, 4) * 3
    dcp.save({"w": saved}, storage_writer=TensorFileWriter(tmp_path), no_dist=True)
    copied = _spy_copies(monkeypatch)
    into = torch.zeros(3, 4, dtype=torch.float64)
    dcp.load({"w": into}, storage_reader=TensorFileReader(tmp_path), no_dist=True)
    assert into.dtype == torch.float64
    assert torch.equal(into, saved.to(torch.float64))
    assert len(copied) == 1


def _read_item(
    fqn: str, storage_offsets: tuple[int, ...], dest_offsets: tuple[int, ...], lengths: tuple[int, ...]
) -> ReadItem:
    zeros = (0,) * len(lengths)
    return ReadItem(
        type=LoadItemType.TENSOR,
        dest_index=MetadataIndex(fqn, zeros),
        dest_offsets=torch.Size(dest_offsets),
        storage_index=MetadataIndex(fqn, zeros),
        storage_offsets=torch.Size(storage_offsets),
        lengths=torch.Size(lengths),
    )


def test_parts_of_a_saved_chunk_are_narrowed_and_copied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As when resharding: each read item is a block of the saved chunk, placed into part of the destination."""
    saved = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    dcp.save({"w": saved}, storage_writer=TensorFileWriter(tmp_path), no_dist=True)
    reader = TensorFileReader(tmp_path)
    reader.set_up_storage_reader(reader.read_metadata(), is_coordinator=True)
    copied = _spy_copies(monkeypatch)

    block = torch.zeros(2, 3)
    planner = DefaultLoadPlanner()
    planner.set_up_planner({"w": block}, reader.read_metadata(), is_coordinator=True)
    reader.read_data(LoadPlan([_read_item("w", (1, 2), (0, 0), (2, 3))]), planner).wait()
    assert torch.equal(block, saved[1:3, 2:5])

    whole = torch.zeros(4, 6)
    planner = DefaultLoadPlanner()
    planner.set_up_planner({"w": whole}, reader.read_metadata(), is_coordinator=True)
    quarters = [_read_item("w", (row, col), (row, col), (2, 3)) for row in (0, 2) for col in (0, 3)]
    reader.read_data(LoadPlan(quarters), planner).wait()
    assert torch.equal(whole, saved)
    assert len(copied) == 5


def test_a_truncated_data_file_fails_the_load_naming_the_file(tmp_path: Path) -> None:
    state = _state()
    dcp.save(state, storage_writer=TensorFileWriter(tmp_path), no_dist=True)
    data = tmp_path / "__0_0.distcp"
    size = data.stat().st_size
    os.truncate(data, size - 1)
    with pytest.raises(CheckpointException) as error:
        dcp.load(_blank(state), storage_reader=TensorFileReader(tmp_path), no_dist=True)
    [(failure, _)] = error.value.failures.values()
    assert isinstance(failure, ValueError)
    assert re.fullmatch(
        rf"{re.escape(str(data))}: holds {size - 1} bytes, records run to byte {size} \(truncated\?\)", str(failure)
    )


def test_a_reader_for_a_rank_prefetches_that_ranks_own_file_until_the_reads_begin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = _state()
    dcp.save(state, storage_writer=TensorFileWriter(tmp_path), no_dist=True)
    started: list[list[Path]] = []
    stopped_before_reads: list[bool] = []

    class Recorded(Prefetch):
        def __init__(self, paths: list[Path]) -> None:
            started.append(list(paths))
            super().__init__(paths)

    read_records = storage.read_records

    def reads(path: Any, records: Any) -> list[bool]:
        stopped_before_reads.append(all(prefetch.stopping for prefetch in prefetches))
        return read_records(path, records)

    monkeypatch.setattr(storage, "Prefetch", Recorded)
    monkeypatch.setattr(storage, "read_records", reads)
    prefetches: list[Prefetch] = []
    for rank in (None, 3):  # no rank given, or no file of that rank: nothing to prefetch
        assert TensorFileReader(tmp_path, rank=rank)._prefetch is None
    reader = TensorFileReader(tmp_path, rank=0)
    assert reader._prefetch is not None
    prefetches.append(reader._prefetch)
    assert started == [[tmp_path / "__0_0.distcp"]]
    target = _blank(state)
    dcp.load(target, storage_reader=reader, no_dist=True)
    _assert_same(target, state)
    assert stopped_before_reads == [True]
    assert reader._prefetch.wait() in (0, (tmp_path / "__0_0.distcp").stat().st_size)  # one chunk, or stopped first
    reader.stop_prefetch()  # again, as the manager does after any load: harmless
