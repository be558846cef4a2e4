"""CheckpointManager on a one-rank gloo group with a real FSDP2 model and AdamW state."""

import errno
import json
import os
import pickle
import threading
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
from torch.distributed.tensor import DTensor

from tests.waiting import wait_until
from training.checkpoint import file_io
from training.checkpoint.errors import CheckpointError, CheckpointSpaceError
from training.checkpoint.layout import MARKER, complete_checkpoints, step_dir, tmp_dir
from training.checkpoint.manager import CheckpointManager
from training.checkpoint.ownership import NotOwnedError
from training.checkpoint.state import training_state
from training.checkpoint.storage import TensorFileWriter
from training.config import CheckpointSection, ParallelSection
from training.models import ModelArgs
from training.models.transformer import build_model
from training.parallel.dims import ParallelDims
from training.parallel.fsdp import mixed_precision_policy
from training.parallel.mesh import build_mesh
from training.parallel.parallelize import parallelize, plain_name

pytestmark = pytest.mark.usefixtures("process_group")
ARGS = ModelArgs(flavor="neox", dim=32, n_layers=2, n_heads=4, ffn_dim=64, vocab_size=50, rotary_pct=0.25)


def _trained(seed: int) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    model = build_model(ARGS)
    parallelize(
        model,
        ParallelSection(),
        build_mesh(ParallelDims(dp_replicate=1, dp_shard=1), "cpu"),
        mixed_precision_policy("fp32", torch.device("cpu")),
    )
    model.to_empty(device="cpu")
    model.init_weights()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ids = torch.randint(0, ARGS.vocab_size, (2, 8))
    model(ids).square().mean().backward()
    optimizer.step()
    return model, optimizer


def _manager(root: Path, **section: Any) -> CheckpointManager:
    return CheckpointManager(root, CheckpointSection(**section), rank=0, world_size=1, param_count=10_000)


def _weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: (p.full_tensor() if isinstance(p, DTensor) else p).detach().clone() for n, p in model.named_parameters()}


def _save(manager: CheckpointManager, step: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
    manager.save(step, training_state(model, optimizer), {"step": step, "note": "x"}, {"torch": torch.get_rng_state()})


def test_round_trip_restores_weights_optimizer_and_trainer_state(tmp_path: Path) -> None:
    model, optimizer = _trained(seed=0)
    manager = _manager(tmp_path)
    assert manager.prepare() is None
    rng_at_save = torch.get_rng_state()
    _save(manager, 7, model, optimizer)
    assert sorted(p.name for p in step_dir(tmp_path, 7).iterdir()) == [
        ".metadata",
        MARKER,
        "__0_0.distcp",
        "rng",
        "trainer_state.json",
    ]

    other, other_optimizer = _trained(seed=1)
    latest = manager.prepare()
    assert latest == (7, step_dir(tmp_path, 7))
    state, rng = manager.load(latest[1], training_state(other, other_optimizer))
    assert state == {"step": 7, "note": "x"}
    assert rng is not None
    assert torch.equal(rng["torch"], rng_at_save)
    assert not torch.equal(torch.get_rng_state(), rng_at_save)
    for name, weight in _weights(model).items():
        assert torch.equal(_weights(other)[name], weight), name
    first = next(iter(optimizer.state.values()))
    restored = next(iter(other_optimizer.state.values()))
    assert torch.equal(restored["step"], first["step"])
    assert torch.equal(restored["exp_avg"].full_tensor(), first["exp_avg"].full_tensor())


def test_torchs_stock_reader_and_format_utils_load_the_trainers_checkpoint(tmp_path: Path) -> None:
    """What torchtitan and `format_utils` do with a DCP directory: FileSystemReader, no code of ours."""
    model, optimizer = _trained(seed=0)
    manager = _manager(tmp_path)
    manager.prepare()
    _save(manager, 3, model, optimizer)
    other, other_optimizer = _trained(seed=1)
    dcp.load(training_state(other, other_optimizer), storage_reader=FileSystemReader(step_dir(tmp_path, 3)))
    for name, weight in _weights(model).items():
        assert torch.equal(_weights(other)[name], weight), name
    first, restored = next(iter(optimizer.state.values())), next(iter(other_optimizer.state.values()))
    assert torch.equal(restored["exp_avg"].full_tensor(), first["exp_avg"].full_tensor())

    dcp_to_torch_save(step_dir(tmp_path, 3), tmp_path / "model.pt")
    converted = torch.load(tmp_path / "model.pt", weights_only=True)
    plain = {name: tensor for name, tensor in converted["model"].items()}
    for name, weight in _weights(model).items():
        assert torch.equal(plain[plain_name(name)], weight), name


def test_partial_checkpoints_are_ignored_and_removed_at_start(tmp_path: Path) -> None:
    model, optimizer = _trained(seed=0)
    manager = _manager(tmp_path)
    manager.prepare()
    _save(manager, 2, model, optimizer)
    # A crash during a save (tmp dir) and one between rename and marker (no marker).
    tmp_dir(tmp_path, 4).mkdir()
    (tmp_dir(tmp_path, 4) / "__0_0.distcp").write_bytes(b"half")
    step_dir(tmp_path, 6).mkdir()
    (step_dir(tmp_path, 6) / ".metadata").write_bytes(b"")
    assert manager.prepare() == (2, step_dir(tmp_path, 2))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-2"]


def test_keeps_only_the_last_k(tmp_path: Path) -> None:
    model, optimizer = _trained(seed=0)
    manager = _manager(tmp_path, keep_last=2)
    manager.prepare()
    for step in (1, 2, 3, 4):
        _save(manager, step, model, optimizer)
    assert [step for step, _ in complete_checkpoints(tmp_path)] == [3, 4]


def test_async_save_commits_when_waited_for(tmp_path: Path) -> None:
    model, optimizer = _trained(seed=0)
    expected = _weights(model)
    manager = _manager(tmp_path, async_save=True)
    manager.prepare()
    _save(manager, 5, model, optimizer)
    with torch.no_grad():  # training goes on while the shards are written: the checkpoint must not see this
        for param in model.parameters():
            param.add_(1.0)
    manager.wait()
    assert (step_dir(tmp_path, 5) / MARKER).is_file()
    other, other_optimizer = _trained(seed=1)
    manager.load(step_dir(tmp_path, 5), training_state(other, other_optimizer))
    for name, weight in expected.items():
        assert torch.equal(_weights(other)[name], weight), name


def test_a_finished_async_save_is_committed_by_the_next_poll_and_not_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The shard write is held until the test lets it go: a slow disk, made deterministic.
    write_may_finish = threading.Event()
    original_write = TensorFileWriter.write_data

    def held_write(self: TensorFileWriter, *args: Any, **kwargs: Any) -> Any:
        assert write_may_finish.wait(timeout=600)
        return original_write(self, *args, **kwargs)

    monkeypatch.setattr(TensorFileWriter, "write_data", held_write)
    model, optimizer = _trained(seed=0)
    manager = _manager(tmp_path, async_save=True)
    manager.prepare()
    _save(manager, 5, model, optimizer)
    assert manager.poll() is None  # still writing: nothing committed, the save stays pending
    assert tmp_dir(tmp_path, 5).is_dir() and not step_dir(tmp_path, 5).exists()

    write_may_finish.set()
    # No further save, stop or end: the poll a training step makes commits it once the write is done.
    assert wait_until(manager.poll, "the finished async save of step 5 committed by a poll", poll_s=0.01) == 5
    assert (step_dir(tmp_path, 5) / MARKER).is_file() and not tmp_dir(tmp_path, 5).exists()
    assert manager.poll() is None  # nothing pending any more
    manager.wait()  # and nothing left to commit
    assert [step for step, _ in complete_checkpoints(tmp_path)] == [5]


def test_a_poll_without_async_saves_does_nothing(tmp_path: Path) -> None:
    model, optimizer = _trained(seed=0)
    manager = _manager(tmp_path)
    manager.prepare()
    _save(manager, 3, model, optimizer)
    assert manager.poll() is None and [step for step, _ in complete_checkpoints(tmp_path)] == [3]


def test_a_failed_write_raises_on_every_rank_cleans_up_and_keeps_the_last_good(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, optimizer = _trained(seed=0)
    manager = _manager(tmp_path)
    manager.prepare()
    _save(manager, 1, model, optimizer)

    def failing_write(*args: Any, **kwargs: Any) -> Any:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(file_io, "_pwrite_all", failing_write)
    with pytest.raises(CheckpointError) as error:
        _save(manager, 2, model, optimizer)
    message = str(error.value)
    assert message.startswith("checkpoint step-2: writing shards failed: rank 0: [Errno 5] Input/output error")
    assert message.endswith(f"the last good checkpoint is {step_dir(tmp_path, 1)}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-1"]


def test_refusal_for_space_happens_before_anything_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    from training.checkpoint import space

    monkeypatch.setattr(space.shutil, "disk_usage", lambda _: shutil._ntuple_diskusage(1000, 1000, 0))
    model, optimizer = _trained(seed=0)
    manager = _manager(tmp_path)
    manager.prepare()
    with pytest.raises(CheckpointSpaceError, match=r"^checkpoint.dir: .* has 0.000 GiB free"):
        _save(manager, 1, model, optimizer)
    assert list(tmp_path.iterdir()) == []


def test_trainer_state_is_readable_json(tmp_path: Path) -> None:
    model, optimizer = _trained(seed=0)
    manager = _manager(tmp_path)
    manager.prepare()
    _save(manager, 3, model, optimizer)
    assert json.loads((step_dir(tmp_path, 3) / "trainer_state.json").read_text())["step"] == 3


# -- issue 43: a checkpoint another user could have written is never loaded ----------------------------------------

NOBODY = 65534
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="files of another user are made by chown: root only")


class _RunsACommand:
    """Unpickled, runs `command`: what a planted pickle would do."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (self.command,))


@needs_root
def test_a_committed_step_with_a_file_of_another_user_is_refused_before_any_read(tmp_path: Path) -> None:
    model, optimizer = _trained(seed=0)
    root = tmp_path / "checkpoints"
    manager = _manager(root)
    manager.prepare()
    _save(manager, 7, model, optimizer)
    metadata = step_dir(root, 7) / ".metadata"
    marker = tmp_path / "code-ran"
    metadata.write_bytes(pickle.dumps(_RunsACommand(f"touch {marker}")))  # what the other user put there
    os.chown(metadata, NOBODY, NOBODY)
    with pytest.raises(NotOwnedError) as refused:
        _manager(root).prepare()
    assert str(refused.value).startswith(f"checkpoint {metadata} is owned by nobody:nogroup (mode 0644), not by")
    assert not marker.exists()


@needs_root
def test_a_checkpoint_root_of_another_user_is_refused_before_anything_is_written_there(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    leftover = tmp_dir(root, 3)
    leftover.mkdir(parents=True)
    os.chown(root, NOBODY, NOBODY)
    with pytest.raises(NotOwnedError, match=rf"^checkpoint.dir {root} is owned by nobody:nogroup \(mode 0755\)"):
        _manager(root).prepare()
    assert leftover.is_dir()  # a start would remove it: nothing was touched


def test_an_rng_file_holding_code_is_never_unpickled_even_when_the_job_wrote_it(tmp_path: Path) -> None:
    model, optimizer = _trained(seed=0)
    manager = _manager(tmp_path)
    manager.prepare()
    _save(manager, 7, model, optimizer)
    marker = tmp_path.parent / f"{tmp_path.name}-code-ran"
    torch.save({"torch": _RunsACommand(f"touch {marker}")}, step_dir(tmp_path, 7) / "rng" / "rank0.pt")
    other, other_optimizer = _trained(seed=1)
    state, rng = manager.load(step_dir(tmp_path, 7), training_state(other, other_optimizer))
    assert (state["step"], rng) == (7, None)  # the trainer reseeds
    assert not marker.exists()
