"""The evaluation job on a tiny trained run, against lm-eval's own CLI on the same exported directory."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from tests.training.jobs import tiny_job
from training.evaluate.harness import OFFLINE_ENV
from training.evaluate.run import main
from training.evaluate.task_data import build_task_data
from training.train import main as train

TASKS = "demo_heldout,demo_choice"
LIMIT = 12  # documents per task: enough to differ between checkpoints, quick on two cores


@pytest.fixture(scope="module")
def trained(demo_data_prefix: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("evaluate")
    job = tiny_job(demo_data_prefix, train={"max_steps": 6}, checkpoint={"every": 3, "keep_last": 3})
    (root / "job.yaml").write_text(yaml.safe_dump(job))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert train(["--config", str(root / "job.yaml"), "--run-dir", str(root / "run")]) == 0
    finally:
        torch.set_num_threads(threads)
    build_task_data(root / "tasks")
    tokenizer = Path(demo_data_prefix.removesuffix("_text_document") + "_tokenizer.json")
    return root / "run", root / "tasks", tokenizer


def _argv(trained: tuple[Path, Path, Path], *extra: str) -> list[str]:
    run_dir, tasks, tokenizer = trained
    return ["--run-dir", str(run_dir), "--tokenizer", str(tokenizer), "--tasks-dir", str(tasks), "--tasks", TASKS,
            "--limit", str(LIMIT), *extra]  # fmt: skip


def test_every_checkpoint_is_scored_and_lm_evals_own_cli_gives_the_same_numbers(
    trained: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    run_dir = trained[0]
    assert main(_argv(trained, "--all")) == 0
    ours = {step: json.loads((run_dir / "eval" / f"step-{step}" / "results.json").read_text()) for step in (3, 6)}
    assert ours[3]["results"] != ours[6]["results"]
    table = (run_dir / "eval" / "scores.md").read_text()
    assert "| 6 | demo_choice | acc |" in table and "| 3 | demo_heldout | bits_per_byte |" in table
    assert (run_dir / "eval" / "scores.png").stat().st_size > 0
    # lm-eval's CLI, as a user would run it, on the directory our job exported and the tasks it rendered.
    cli = [sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args", f"pretrained={run_dir}/export/step-6,dtype=float32",
           "--include_path", str(run_dir / "eval" / "tasks"), "--tasks", TASKS, "--device", "cpu", "--batch_size", "8",
           "--limit", str(LIMIT), "--output_path", str(tmp_path / "cli")]  # fmt: skip
    done = subprocess.run(cli, env={**OFFLINE_ENV, "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, capture_output=True,
                          text=True, timeout=600, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (written,) = (tmp_path / "cli").rglob("results_*.json")
    theirs = json.loads(written.read_text())
    # The same numbers, exactly: the same model, data, seeds and batch size on the same machine.
    assert theirs["results"] == ours[6]["results"]
    # A scored step is never scored again: a rerun (a requeued job) only rewrites the summary.
    before = (run_dir / "eval" / "step-3" / "results.json").stat().st_mtime_ns
    assert main(_argv(trained, "--all")) == 0
    assert (run_dir / "eval" / "step-3" / "results.json").stat().st_mtime_ns == before


def test_a_missing_checkpoint_is_one_line(trained: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_argv(trained, "--step", "4")) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --step: 4 has no committed checkpoint under ") and err.count("\n") == 1


def test_auto_takes_the_cpu_on_a_node_without_cuda_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    from training.evaluate.run import resolve_device

    assert resolve_device("auto", 8) == ("cpu", 1)  # this host has no CUDA device: one process, no device map
    assert "device: cpu (--device auto found no CUDA device on this node)" in capsys.readouterr().out
    assert resolve_device("cuda", 8) == ("cuda", 8)  # named, it is taken as given
