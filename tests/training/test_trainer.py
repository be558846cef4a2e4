"""The training loop in one process (gloo, world size 1): learning, artifacts, guards and checkpoint failures."""

import errno
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.distributed.tensor import DTensor
from torch.overrides import TorchFunctionMode

from tests.training.jobs import records, tiny_job, write_job
from training.checkpoint import file_io
from training.checkpoint.layout import TRAINER_STATE, complete_checkpoints
from training.config import parse_job_config
from training.export import load_checkpoint_model
from training.parallel.dist import DistContext
from training.signals import EXIT_CHECKPOINT_FAILED, EXIT_CONFIG_ERROR, EXIT_LOSS_GUARD, EXIT_OK, EXIT_STATUS_FILE
from training.train import main
from training.trainer import Trainer

REQUIRED_KEYS = {"step", "loss", "lr", "grad_norm", "tokens_per_s", "mfu", "hfu", "mem_gib", "step_time_s"}


def _train(tmp_path: Path, job: dict[str, Any], name: str = "run", *extra: str) -> tuple[int, Path]:
    config = write_job(tmp_path / f"{name}.yaml", job)
    run_dir = tmp_path / "run"
    return main(["--config", str(config), "--run-dir", str(run_dir), *extra]), run_dir


def _status(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / EXIT_STATUS_FILE).read_text())


@pytest.mark.usefixtures("one_thread")
def test_loss_falls_on_real_text_and_every_artifact_is_written(demo_data_prefix: str, tmp_path: Path) -> None:
    job = tiny_job(
        demo_data_prefix,
        train={"max_steps": 30, "eval_every": 15},
        metrics={"tensorboard": True, "plot": True},
        profile={"start_step": 3, "steps": 2},
        checkpoint={"every": "off"},
    )
    code, run_dir = _train(tmp_path, job)
    assert code == EXIT_OK

    train = records(run_dir, "train")
    assert [r["step"] for r in train] == list(range(1, 31))
    for record in train:
        assert record.keys() >= REQUIRED_KEYS
        assert record["hfu"] == pytest.approx(record["mfu"])  # no activation checkpointing: nothing recomputed
    first, last = train[0]["loss"], sum(r["loss"] for r in train[-5:]) / 5
    assert first == pytest.approx(6.24, abs=0.15)  # ln(512): a fresh model guesses uniformly
    assert last < first - 0.8, (first, last)

    validation = records(run_dir, "validation")
    assert [r["step"] for r in validation] == [0, 15, 30]
    assert validation[-1]["val_loss"] < validation[0]["val_loss"] - 0.5

    assert (run_dir / "metrics.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert list((run_dir / "tensorboard").glob("events.out.tfevents.*"))
    trace = json.loads((run_dir / "profile" / "rank0_steps3-4.json").read_text())
    assert trace["traceEvents"]
    assert [step for step, _ in complete_checkpoints(run_dir / "checkpoints")] == [30]
    assert _status(run_dir)["exit_code"] == EXIT_OK


@pytest.mark.usefixtures("one_thread")
def test_a_plot_that_fails_is_a_warning_not_a_failed_run(
    demo_data_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    # The run is trained and checkpointed by then: a failed picture must not make the job script requeue it.
    import training.trainer

    def broken_plot(run_dir: Path) -> Path:
        raise RuntimeError("no fonts here")

    monkeypatch.setattr(training.trainer, "plot_run", broken_plot)
    job = tiny_job(demo_data_prefix, train={"max_steps": 2}, metrics={"plot": True}, checkpoint={"every": "off"})
    code, run_dir = _train(tmp_path, job)
    assert code == EXIT_OK and _status(run_dir)["exit_code"] == EXIT_OK
    assert "WARNING plot not written: RuntimeError: no fonts here" in capfd.readouterr().out
    assert [step for step, _ in complete_checkpoints(run_dir / "checkpoints")] == [2]


@pytest.mark.usefixtures("one_thread")
def test_a_diverging_loss_stops_the_run_and_keeps_the_last_good_checkpoint(
    demo_data_prefix: str, tmp_path: Path
) -> None:
    guards = {"loss_spike_min_history": 2}
    code, run_dir = _train(tmp_path, tiny_job(demo_data_prefix, train={"max_steps": 4}, guards=guards))
    assert code == EXIT_OK
    good = load_checkpoint_model(run_dir / "checkpoints" / "step-4").state_dict()

    # The same run continued with a learning rate that blows it up.
    diverging = tiny_job(
        demo_data_prefix, train={"max_steps": 12}, optim={"lr": 50.0, "warmup_steps": 0}, guards=guards
    )
    code, run_dir = _train(tmp_path, diverging, "diverging")
    assert code == EXIT_LOSS_GUARD
    reason = _status(run_dir)["reason"]
    assert "stopping before the optimizer step" in reason
    assert "loss" in reason
    assert [step for step, _ in complete_checkpoints(run_dir / "checkpoints")] == [4]
    kept = load_checkpoint_model(run_dir / "checkpoints" / "step-4").state_dict()
    assert all(kept[name].equal(tensor) for name, tensor in good.items())


@contextmanager
def _small_filesystem(path: Path, size_bytes: int) -> Iterator[bool]:
    """A tmpfs of `size_bytes` at `path` (needs root); yields False where mounting is not allowed."""
    path.mkdir()
    # mode: a new tmpfs is 1777, which the trainer refuses (any user could plant a checkpoint there).
    command = ["mount", "-t", "tmpfs", "-o", f"size={size_bytes},mode=0750", "tmpfs", str(path)]
    try:
        mounted = subprocess.run(command, capture_output=True, check=False).returncode == 0
    except FileNotFoundError:  # no mount(8) at all
        mounted = False
    try:
        yield mounted
    finally:
        if mounted:
            subprocess.run(["umount", str(path)], check=True)


def _fail_writes_into(step_name: str) -> Callable[..., Any]:
    """Fallback without a mountable tmpfs: the checkpoint storage raises ENOSPC for files of one checkpoint."""
    original = file_io.open_for_writing

    def open_for_writing(path: Any) -> Any:
        if f"{step_name}.tmp" in str(path):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return original(path)

    return open_for_writing


@pytest.mark.usefixtures("one_thread")
def test_no_space_left_while_saving_stops_the_job_and_the_last_checkpoint_still_loads(
    demo_data_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpoints = tmp_path / "small-disk"
    # One checkpoint of this model is about 1.7 MB: the first fits, the second runs out of space mid-write.
    with _small_filesystem(checkpoints, 2_600_000) as real_disk:
        if not real_disk:
            monkeypatch.setattr(file_io, "open_for_writing", _fail_writes_into("step-4"))
        job = tiny_job(
            demo_data_prefix,
            train={"max_steps": 8},
            checkpoint={"every": 2, "keep_last": 1, "dir": str(checkpoints), "free_space_margin": 0.0},
        )
        code, run_dir = _train(tmp_path, job)

        assert code == EXIT_CHECKPOINT_FAILED
        reason = _status(run_dir)["reason"]
        assert "checkpoint step-4: writing shards failed" in reason
        assert "No space left on device" in reason
        assert f"the last good checkpoint is {checkpoints / 'step-2'}" in reason
        assert sorted(p.name for p in checkpoints.iterdir()) == ["step-2"]  # the partial step-4.tmp is gone
        assert max(r["step"] for r in records(run_dir, "train")) == 4  # stopped right there, no training unsaved
        model = load_checkpoint_model(checkpoints / "step-2")
        assert sum(p.numel() for p in model.parameters()) > 0


@pytest.mark.usefixtures("one_thread")
def test_the_free_space_check_refuses_a_save_that_cannot_fit(
    demo_data_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpoints = tmp_path / "small-disk"
    with _small_filesystem(checkpoints, 1_000_000) as real_disk:
        if not real_disk:
            import shutil

            from training.checkpoint import space

            monkeypatch.setattr(space.shutil, "disk_usage", lambda _: shutil._ntuple_diskusage(10**6, 0, 10**6))
        job = tiny_job(demo_data_prefix, train={"max_steps": 3}, checkpoint={"every": 2, "dir": str(checkpoints)})
        code, run_dir = _train(tmp_path, job)

        assert code == EXIT_CHECKPOINT_FAILED
        reason = _status(run_dir)["reason"]
        assert reason.startswith(f"checkpoint.dir: {str(checkpoints)!r} has 0.00")
        assert "bytes x 139,584 parameters, x1.2 margin" in reason
        assert not any(checkpoints.iterdir())  # refused before writing anything


@pytest.mark.usefixtures("one_thread")
def test_a_loader_state_of_another_version_is_a_one_line_config_error_not_a_requeue(
    demo_data_prefix: str, tmp_path: Path
) -> None:
    job = tiny_job(demo_data_prefix, train={"max_steps": 4}, checkpoint={"every": 4})
    code, run_dir = _train(tmp_path, job)
    assert code == EXIT_OK
    [(_, checkpoint)] = complete_checkpoints(run_dir / "checkpoints")
    state_file = checkpoint / TRAINER_STATE
    state = json.loads(state_file.read_text())
    state["loader"]["version"] = 1  # as written by the loader before validation runs (state v2)
    state_file.write_text(json.dumps(state))

    job["train"]["max_steps"] = 8
    code, run_dir = _train(tmp_path, job)
    assert code == EXIT_CONFIG_ERROR
    reason = _status(run_dir)["reason"]
    assert "\n" not in reason
    assert reason.endswith(
        f"loader state: version: 1 does not match this loader's 2 (in {checkpoint}); resume with the version that "
        "wrote it, or start a new run"
    )


@pytest.mark.usefixtures("process_group")
def test_one_process_trains_a_plain_module_with_bf16_from_autocast(demo_data_prefix: str, tmp_path: Path) -> None:
    job = tiny_job(demo_data_prefix, parallel={"mixed_precision": "bf16"}, checkpoint={"every": "off"})
    trainer = Trainer(
        parse_job_config(job, source="test"), tmp_path / "run", DistContext(0, 1, 0, torch.device("cpu"), "gloo")
    )
    try:
        assert trainer.mesh is None
        assert not any(isinstance(param, DTensor) for param in trainer.model.parameters())
        matmul_dtypes: list[torch.dtype] = []
        query = trainer.model.layers[0].attention.wq
        query.register_forward_hook(lambda module, args, out: matmul_dtypes.append(out.dtype))
        batches = iter(trainer.train_loader)
        trainer._train_step(batches)
        batches.close()  # type: ignore[attr-defined]
    finally:
        trainer.metrics.close()
    assert matmul_dtypes == [torch.bfloat16] * trainer.grad_accum
    assert {param.dtype for param in trainer.model.parameters()} == {torch.float32}  # master weights stay fp32
    assert all(param.grad is None for param in trainer.model.parameters())  # zero_grad after the step
    assert trainer.step == 1


class _HostReads(TorchFunctionMode):
    """Records every call that makes the host read a tensor's value: on a GPU, each is a wait for the device.
    (numpy() is left out: it only works on host tensors, such as the loader's batches.)"""

    READS = (
        torch.Tensor.item,
        torch.Tensor.tolist,
        torch.Tensor.__bool__,
        torch.Tensor.__float__,
        torch.Tensor.__int__,
        torch.Tensor.__index__,
        torch.Tensor.cpu,
    )

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if func in self.READS:
            self.calls.append(func.__name__)
        return func(*args, **(kwargs or {}))


@pytest.mark.usefixtures("process_group")
def test_a_step_reads_nothing_back_from_the_device_until_it_is_logged(demo_data_prefix: str, tmp_path: Path) -> None:
    job = tiny_job(demo_data_prefix, train={"max_steps": 10, "log_every": 3}, checkpoint={"every": "off"})
    trainer = Trainer(
        parse_job_config(job, source="test"), tmp_path / "run", DistContext(0, 1, 0, torch.device("cpu"), "gloo")
    )
    reads: list[list[str]] = []
    batches = iter(trainer.train_loader)
    try:
        for _ in range(3):
            with _HostReads() as mode:
                trainer._train_step(batches)
            reads.append(mode.calls)
    finally:
        batches.close()  # type: ignore[attr-defined]
        trainer.metrics.close()
    assert reads[0] == [] and reads[1] == []  # loss, token counts, guard and gradient norm stay on the device
    assert reads[2]  # step 3 is logged: there the host reads them (so the counter does see reads)
    assert trainer.optimizer.defaults["fused"] is True
