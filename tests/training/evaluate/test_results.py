"""training.evaluate.results: one reader of lm-eval's results for the job's table and for llm-report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from planner.eval_scores import latest_scores_line
from training.evaluate.results import Score, evaluated_steps, run_scores

REPO = Path(__file__).resolve().parents[3]
RESULTS = {
    "results": {
        "demo_choice": {"alias": "demo_choice", "acc,none": 0.5, "acc_stderr,none": 0.1, "sample_len": 8},
        "demo_text": {"bits_per_byte,none": 2.25, "flagged,none": True},
    }
}


def _run(tmp_path: Path, steps: dict[int, object]) -> Path:
    for step, results in steps.items():
        (tmp_path / "eval" / f"step-{step}").mkdir(parents=True)
        (tmp_path / "eval" / f"step-{step}" / "results.json").write_text(json.dumps(results))
    (tmp_path / "eval" / "step-x").mkdir()  # not a step: ignored
    return tmp_path


def test_rows_are_the_numeric_metrics_with_their_stderr(tmp_path: Path) -> None:
    run = _run(tmp_path, {20: RESULTS, 5: RESULTS})
    assert list(evaluated_steps(run)) == [5, 20]
    assert run_scores(run)[:2] == [
        Score(5, "demo_choice", "acc", 0.5, 0.1),
        Score(5, "demo_text", "bits_per_byte", 2.25, None),
    ]


def test_llm_reports_line_is_the_latest_steps_rows(tmp_path: Path) -> None:
    later = json.loads(json.dumps(RESULTS))
    later["results"]["demo_choice"]["acc,none"] = 0.75
    run = _run(tmp_path, {5: RESULTS, 20: later})
    assert latest_scores_line(run) == f"scores {run} step 20: demo_choice acc 0.75, demo_text bits_per_byte 2.25"


def test_a_results_file_that_is_not_lm_evals_is_said_in_the_line(tmp_path: Path) -> None:
    run = _run(tmp_path, {3: ["not", "a", "mapping"]})
    assert latest_scores_line(run).startswith(f"scores {run}: {run}/eval/step-3/results.json does not read")


def test_the_reader_imports_neither_torch_nor_matplotlib() -> None:
    script = (
        "import sys, training.evaluate.results, planner.eval_scores\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'matplotlib')))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
