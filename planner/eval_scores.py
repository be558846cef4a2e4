"""The latest evaluation of a run for llm-report, read by the trainer's own results reader
(training.evaluate.results: torch- and matplotlib-free, so the planner stays light)."""

from __future__ import annotations

from pathlib import Path

from training.evaluate.results import EVAL_DIR, RESULTS_FILE, evaluated_steps, read_results, score_rows


def latest_scores_line(run_dir: Path) -> str:
    """`scores <run> step N: task metric value, ...` for the highest scored step; says so when there is none."""
    steps = evaluated_steps(run_dir)
    if not steps:
        return f"scores {run_dir}: none yet (llm-eval writes {run_dir}/{EVAL_DIR}/step-N/{RESULTS_FILE})"
    step, path = max(steps.items())
    try:
        rows = score_rows(step, read_results(path))
    except (OSError, ValueError, AttributeError) as error:
        return f"scores {run_dir}: {path} does not read as lm-eval results ({error})"
    return f"scores {run_dir} step {step}: " + ", ".join(f"{row.task} {row.metric} {row.value:.4g}" for row in rows)
