"""llm-eval's rendering and its refusals, without a cluster (the SLURM journey is tests/launch/test_eval_slurm.py)."""

import os
import pwd
import subprocess
from pathlib import Path

import pytest

from cluster.verify.local_slurm.install import ensure_shellcheck
from launch.evaluate import main
from training.evaluate.task_data import build_task_data

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("tasks")
    build_task_data(directory)
    return directory


def _argv(run_dir: Path, tasks: Path, *extra: str) -> list[str]:
    tokenizer = Path(__file__)  # any existing file: rendering does not read it
    return ["--run-dir", str(run_dir), "--tasks-dir", str(tasks), "--tokenizer", str(tokenizer), "--local", *extra]


@pytest.mark.parametrize(
    ("written", "steps"), [("checkpoint: {keep_last: 2}\n", 400), ("checkpoint: {every: null}\n", 400)]
)
def test_a_run_without_checkpoint_every_is_scored_at_the_trainers_fallback_interval(
    tmp_path: Path, tasks: Path, capsys: pytest.CaptureFixture[str], written: str, steps: int
) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "job-config.yaml").write_text(written)  # unset: the trainer saves every 100 steps
    assert main(_argv(run_dir, tasks, "--every", "4", "--after", "123", "--dry-run")) == 0
    assert f"--every-steps {steps}" in capsys.readouterr().out


def test_the_rendered_watcher_script_is_valid_bash_and_scores_every_nth_checkpoint(
    tmp_path: Path, tasks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "job-config.yaml").write_text("checkpoint: {every: 50}\n")
    assert main(_argv(run_dir, tasks, "--every", "4", "--after", "123", "--dry-run")) == 0
    script = capsys.readouterr().out
    assert "--every-steps 200" in script and "TRAIN_JOB=123" in script and "#SBATCH --no-requeue" in script
    path = tmp_path / "eval.sbatch"
    path.write_text(script)
    assert subprocess.run(["bash", "-n", str(path)], check=False).returncode == 0
    shellcheck = subprocess.run([ensure_shellcheck(), str(path)], capture_output=True, text=True, check=False)
    assert shellcheck.returncode == 0, shellcheck.stdout


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--every", "2"], "error: --after: --every and --after go together"),
        (["--every", "2", "--after", "12"], "error: --every: "),  # the run has no job-config.yaml yet
        (["--step", "0"], "error: --step: 0 must be at least 1"),
        (["--tasks", "hellaswag"], "error: --tasks: 'hellaswag' is in no task YAML under "),
    ],
)
def test_bad_options_are_one_line(
    tmp_path: Path, tasks: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert main(_argv(tmp_path, tasks, *extra, "--dry-run")) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1, err


def test_a_task_file_that_does_not_parse_is_named(
    tmp_path: Path, tasks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "tasks"
    broken.mkdir()
    (broken / "bad.yaml").write_text("task: [bad\n")
    assert main(_argv(tmp_path, broken, "--tasks", "bad", "--dry-run")) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith(f"error: {broken / 'bad.yaml'}: does not parse as a task YAML at line") and err.count("\n") == 1
    )


def test_without_tasks_dir_the_shipped_demo_tasks_are_built_into_the_run_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    argv = ["--run-dir", str(run_dir), "--tokenizer", str(Path(__file__)), "--local"]
    assert main([*argv, "--dry-run"]) == 0  # a dry run builds nothing
    assert f"--tasks-dir {run_dir}/eval/demo-tasks" in capsys.readouterr().out
    assert not (run_dir / "eval").exists()
    assert main([*argv, "--tasks", "hellaswag", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "error: --tasks: 'hellaswag' is not a shipped task (demo_choice, demo_heldout); give --tasks-dir"
    )
    assert err.count("\n") == 1


def test_a_gpu_queue_job_takes_cuda_where_the_node_has_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    argv = ["--run-dir", str(run_dir), "--tokenizer", str(Path(__file__)), "--queue", "gpu", "--dry-run"]
    assert main(argv) == 0
    script = capsys.readouterr().out
    assert "--device auto --gpus 8" in script, script


@pytest.mark.skipif(os.geteuid() != 0, reason="a directory of another user is made by chown: root only")
def test_a_run_directory_of_another_user_is_refused_and_nothing_is_written(
    tmp_path: Path, tasks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its scores go there and its job reads the checkpoints: another user who made the directory could have planted
    what the export unpickles (training/checkpoint/ownership.py)."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "job-config.yaml").write_text("checkpoint: {every: 10}\n")
    nobody = pwd.getpwnam("nobody")
    os.chown(run_dir, nobody.pw_uid, nobody.pw_gid)
    before = sorted(p.name for p in run_dir.iterdir())
    assert main(_argv(run_dir, tasks, "--step", "10")) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"error: --run-dir: {run_dir} is owned by nobody:") and "\n" not in error, error
    assert sorted(p.name for p in run_dir.iterdir()) == before
    assert not (tmp_path / "run.eval.sbatch").exists()


def test_the_eval_job_checks_the_run_directorys_owner_before_it_reads_anything(
    tmp_path: Path, tasks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "job-config.yaml").write_text("checkpoint: {every: 10}\n")
    assert main(_argv(run_dir, tasks, "--step", "10", "--dry-run")) == 0
    script = capsys.readouterr().out
    assert f"OWNERSHIP_TOOL={REPO}/training/checkpoint/ownership.py" in script.replace("'", "")
    assert "EXIT_NOT_OWNED=46" in script
