"""llm-eval --every on the local SLURM cluster: a training job on one node, the watcher on the other scoring every
committed checkpoint while it trains, and the last one after training has left the queue."""

import contextlib
import io
import os
from pathlib import Path

import pytest

from cluster.verify.local_slurm import LocalSlurm
from launch.evaluate import main as eval_main
from tests.launch.conftest import write_job
from tests.launch.slurm_helpers import job_story, submit, wait_for_end
from training.evaluate.task_data import build_task_data

pytestmark = pytest.mark.slurm

STEPS, EVERY = 12, 6


def test_a_watcher_job_scores_the_checkpoints_of_a_training_job_as_it_trains(
    local_slurm: LocalSlurm, demo_data: str, tmp_path: Path
) -> None:
    config = write_job(tmp_path / "tiny.yaml", checkpoint={"every": EVERY, "keep_last": 5})
    run_dir, tasks = tmp_path / "run", build_task_data(tmp_path / "tasks")[0].parent
    (train_job,) = submit(local_slurm, ["--backend", "fsdp", "--model", str(config), "--nodes", "1",
                                        "--data-prefix", demo_data, "--run-dir", str(run_dir), "--local",
                                        "--max-steps", str(STEPS), "--time", "00:20:00", "--signal-lead", "120"])  # fmt: skip
    out, err = io.StringIO(), io.StringIO()
    os.environ["SLURM_CONF"] = str(local_slurm.conf_path)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = eval_main(["--run-dir", str(run_dir), "--tasks-dir", str(tasks), "--local", "--every", "1",
                              "--after", train_job, "--limit", "4", "--poll-s", "2", "--time", "00:20:00"])  # fmt: skip
    finally:
        del os.environ["SLURM_CONF"]
    assert code == 0, err.getvalue()
    eval_job = out.getvalue().split()[0]
    trained = wait_for_end(local_slurm, train_job, run_dir=run_dir)
    scored = wait_for_end(local_slurm, eval_job, run_dir=run_dir)
    story = job_story(local_slurm, run_dir, eval_job)
    assert (trained["JobState"], scored["JobState"], scored["ExitCode"]) == ("COMPLETED", "COMPLETED", "0:0"), story
    assert {trained["NodeList"], scored["NodeList"]} == {"n1", "n2"}  # a node of its own: training never waits
    assert [p.parent.name for p in sorted((run_dir / "eval").glob("step-*/results.json"))] == ["step-12", "step-6"]
    assert "| 12 | demo_choice | acc |" in (run_dir / "eval" / "scores.md").read_text()
    assert (run_dir / "eval" / "scores.png").is_file()
