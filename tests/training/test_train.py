"""End-to-end runs of `python -m training.train`: torchrun with 2 gloo ranks, kills, signals, resumes, fine-tuning."""

import gc
import json
import math
import os
import shutil
import signal
import weakref
from pathlib import Path
from types import SimpleNamespace

import pytest
from safetensors.torch import load_file, save_file

from tests.training.jobs import (
    kill_training,
    killed_run_and_copy,
    losses_by_step,
    records,
    run_training,
    start_training,
    tiny_job,
    wait_for_step,
    write_job,
)
from training import export
from training.signals import EXIT_CONFIG_ERROR, EXIT_NOT_OWNED, EXIT_REQUEUE, EXIT_STATUS_FILE
from training.train import main

STEPS = 24


@pytest.fixture(scope="module")
def reference_run(demo_data_prefix: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(config, run dir) of an uninterrupted 2-rank run, validation at start and end."""
    root = tmp_path_factory.mktemp("reference")
    config = write_job(root / "job.yaml", tiny_job(demo_data_prefix, train={"max_steps": STEPS, "eval_every": STEPS}))
    result = run_training(config, root / "run", ranks=2)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return config, root / "run"


@pytest.fixture(scope="module")
def killed_run(reference_run: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(run dir, untouched copy) of the same job SIGKILLed (launcher and both workers) after step 6."""
    config, _ = reference_run
    return killed_run_and_copy(config, tmp_path_factory.mktemp("killed") / "run", STEPS)


def _resume_step(run_dir: Path) -> int:
    resumes = [r for r in records(run_dir, "event") if r["event"] == "resume"]
    assert len(resumes) == 1, resumes
    return resumes[0]["step"]


@pytest.mark.distributed
def test_sigkilled_run_resumes_with_the_losses_of_an_uninterrupted_run(
    reference_run: tuple[Path, Path], killed_run: tuple[Path, Path]
) -> None:
    config, reference = reference_run
    run_dir, _ = killed_run
    result = run_training(config, run_dir, ranks=2)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    resumed_at = _resume_step(run_dir)
    assert resumed_at >= 4
    expected, resumed = losses_by_step(reference, after=resumed_at), losses_by_step(run_dir, after=resumed_at)
    assert sorted(resumed) == list(range(resumed_at + 1, STEPS + 1))
    for step, loss in expected.items():
        assert abs(resumed[step] - loss) <= 1e-6, (step, resumed[step], loss)


@pytest.mark.distributed
def test_resume_on_one_rank_continues_with_the_same_samples(
    reference_run: tuple[Path, Path], killed_run: tuple[Path, Path]
) -> None:
    config, reference = reference_run
    _, copy = killed_run
    result = run_training(config, copy, ranks=1)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    resumed_at = _resume_step(copy)
    after = {r["step"]: r for r in records(copy, "train") if r["step"] > resumed_at}
    before = {r["step"]: r for r in records(reference, "train") if r["step"] > resumed_at}
    assert sorted(after) == sorted(before)
    for step, record in before.items():
        assert after[step]["batch_checksum"] == record["batch_checksum"], step
        assert after[step]["samples_consumed"] == record["samples_consumed"], step
        assert abs(after[step]["loss"] - record["loss"]) <= 1e-4, step  # one rank sums in another order


@pytest.mark.distributed
def test_a_checkpoint_of_one_process_resumes_on_two_fsdp_ranks(
    reference_run: tuple[Path, Path], tmp_path: Path
) -> None:
    config, _ = reference_run
    one_process = tmp_path / "one-process"
    process = start_training(config, one_process, ranks=1)  # one rank: a plain module, no FSDP
    try:
        wait_for_step(one_process, 6, process)
    finally:
        kill_training(process)
    two_ranks = tmp_path / "two-ranks"
    shutil.copytree(one_process, two_ranks)
    # Initial weights on CPU depend on the world size (DTensor's RNG tracker is CUDA-only), so the run to compare
    # with is the one-process run itself, carried on in one process.
    for run_dir, ranks in ((one_process, 1), (two_ranks, 2)):
        result = run_training(config, run_dir, ranks=ranks)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "replicate 1 x shard 2" in result.stdout

    resumed_at = _resume_step(two_ranks)
    after = {r["step"]: r for r in records(two_ranks, "train") if r["step"] > resumed_at}
    before = {r["step"]: r for r in records(one_process, "train") if r["step"] > resumed_at}
    assert sorted(after) == sorted(before) == list(range(resumed_at + 1, STEPS + 1))
    for step, record in before.items():
        assert after[step]["batch_checksum"] == record["batch_checksum"], step
        assert after[step]["samples_consumed"] == record["samples_consumed"], step
        assert abs(after[step]["loss"] - record["loss"]) <= 1e-4, step  # two ranks sum in another order


def _shard_export(exported: Path, out: Path) -> Path:
    """Split an export into two safetensors files with an HF index, as large checkpoints come."""
    tensors = load_file(exported / export.WEIGHTS_FILE)
    names = sorted(tensors)
    out.mkdir()
    weight_map = {}
    for index, part in enumerate((names[::2], names[1::2])):
        file = f"model-{index + 1:05d}-of-00002.safetensors"
        save_file({name: tensors[name] for name in part}, str(out / file))
        weight_map.update(dict.fromkeys(part, file))
    (out / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    shutil.copyfile(exported / export.CONFIG_FILE, out / export.CONFIG_FILE)
    return out


@pytest.mark.distributed
def test_fine_tuning_from_a_sharded_export_starts_from_the_same_model(
    demo_data_prefix: str, reference_run: tuple[Path, Path], tmp_path: Path
) -> None:
    _, reference = reference_run
    assert export.main(["--run-dir", str(reference), "--output", str(tmp_path / "export")]) == 0
    sharded = _shard_export(tmp_path / "export", tmp_path / "sharded")
    job = tiny_job(demo_data_prefix, train={"max_steps": 3, "eval_every": 3})
    job["model"] = {"hf_checkpoint": str(sharded)}
    result = run_training(write_job(tmp_path / "finetune.yaml", job), tmp_path / "run", ranks=2)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    start = records(tmp_path / "run", "validation")[0]
    end_of_reference = records(reference, "validation")[-1]
    assert (start["step"], end_of_reference["step"]) == (0, STEPS)
    assert abs(start["val_loss"] - end_of_reference["val_loss"]) <= 1e-5
    assert "replicate 1 x shard 2" in result.stdout  # each rank read its half of every tensor
    assert all(math.isfinite(r["loss"]) for r in records(tmp_path / "run", "train"))


@pytest.mark.distributed
def test_sigusr1_on_one_rank_stops_both_hsdp_ranks_after_a_checkpoint(demo_data_prefix: str, tmp_path: Path) -> None:
    job = tiny_job(demo_data_prefix, train={"max_steps": 500}, parallel={"dp_replicate": 2})
    config = write_job(tmp_path / "job.yaml", job)
    run_dir = tmp_path / "run"
    process = start_training(config, run_dir, ranks=2)
    try:
        wait_for_step(run_dir, 2, process)
        workers = _children(process.pid)
        assert len(workers) == 2, workers
        os.kill(max(workers), signal.SIGUSR1)  # one worker only: the ranks must agree among themselves
        output, _ = process.communicate(timeout=600)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert "replicate 2 x shard 1" in output
    status = json.loads((run_dir / EXIT_STATUS_FILE).read_text())
    assert status["exit_code"] == EXIT_REQUEUE, output[-3000:]
    stopped_at = status["step"]
    assert stopped_at < 500
    assert (run_dir / "checkpoints" / f"step-{stopped_at}" / "COMMITTED").is_file()
    assert max(r["step"] for r in records(run_dir, "train")) == stopped_at


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


@pytest.mark.distributed
def test_sigterm_stops_a_single_process_run_with_the_requeue_exit_code(demo_data_prefix: str, tmp_path: Path) -> None:
    config = write_job(tmp_path / "job.yaml", tiny_job(demo_data_prefix, train={"max_steps": 500}))
    run_dir = tmp_path / "run"
    process = start_training(config, run_dir, ranks=1)
    try:
        wait_for_step(run_dir, 2, process)
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=600)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == EXIT_REQUEUE, output[-3000:]
    stopped_at = json.loads((run_dir / EXIT_STATUS_FILE).read_text())["step"]
    assert (run_dir / "checkpoints" / f"step-{stopped_at}" / "COMMITTED").is_file()
    assert "stopped on request (SIGTERM)" in output


@pytest.mark.skipif(os.geteuid() != 0, reason="a directory of another user is made by chown: root only")
def test_a_run_directory_of_another_user_is_refused_and_nothing_is_written_there(
    demo_data_prefix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_job(tmp_path / "job.yaml", tiny_job(demo_data_prefix))
    run_dir = tmp_path / "run"  # created first by another user (nobody), a committed step in it
    step = run_dir / "checkpoints" / "step-4"
    step.mkdir(parents=True)
    (step / "COMMITTED").write_text("{}")
    for path in (run_dir, run_dir / "checkpoints", step, step / "COMMITTED"):
        os.chown(path, 65534, 65534)
    assert main(["--config", str(config), "--run-dir", str(run_dir)]) == EXIT_NOT_OWNED
    errors = [line for line in capsys.readouterr().out.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and errors[0].endswith(
        f"exit {EXIT_NOT_OWNED}: --run-dir {run_dir} is owned by nobody:nogroup (mode 0755), not by this job's user "
        "root or one of its groups: use a run directory of your own (/fsx/runs/<user>/<run>)"
    ), errors
    assert sorted(p.name for p in run_dir.iterdir()) == ["checkpoints"]  # no exit status, no metrics


def test_a_bad_config_exits_with_one_line_naming_the_field(
    demo_data_prefix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_job(tmp_path / "job.yaml", tiny_job(demo_data_prefix, optim={"lr": -1.0, "betas": 3}))
    assert main(["--config", str(config), "--run-dir", str(tmp_path / "run")]) == EXIT_CONFIG_ERROR
    lines = [line for line in capsys.readouterr().out.splitlines() if "job.yaml" in line]
    assert any("optim.lr: -1.0 input should be greater than 0" in line for line in lines), lines
    assert any("optim.betas: 3 is not a known key (misspelled?)" in line for line in lines), lines


def test_the_trainer_is_released_and_collected_before_the_interpreter_shuts_down(
    demo_data_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A trainer's reference cycles, left to the collector at interpreter exit, were freed in an order that aborted
    about one 2-rank exit in ten ("terminate called without an active exception", SIGABRT after `main` returned):
    the job script then saw a dead rank instead of the exit code, and requeued. `main` now drops the trainer and
    collects before it returns (0 aborts in 54 such exits)."""
    from training import trainer as trainer_module
    from training.parallel import dist as dist_module

    events: list[str] = []

    class CyclicTrainer:
        def __init__(self, *args: object) -> None:
            self.step = 3
            self.itself = self  # a cycle: freed only by the collector
            weakref.finalize(self, events.append, "trainer freed")

        def run(self) -> str:
            return "finished"

    monkeypatch.setattr(trainer_module, "Trainer", CyclicTrainer)
    monkeypatch.setattr(dist_module, "init_distributed", lambda: SimpleNamespace(is_main=True))
    monkeypatch.setattr(dist_module, "shutdown_distributed", lambda: events.append("process groups destroyed"))
    config = write_job(tmp_path / "job.yaml", tiny_job(demo_data_prefix))
    collecting = gc.isenabled()
    gc.disable()  # so that only an explicit collection frees the cycle
    try:
        assert main(["--config", str(config), "--run-dir", str(tmp_path / "run")]) == 0
    finally:
        if collecting:
            gc.enable()
    assert events == ["process groups destroyed", "trainer freed"]
    assert json.loads((tmp_path / "run" / EXIT_STATUS_FILE).read_text())["step"] == 3
