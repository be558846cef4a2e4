"""lm-evaluation-harness results as llm-eval leaves them in a run (RUN/eval/step-N/results.json, lm-eval's own
format), read into rows. No torch and no matplotlib: llm-report (the planner) reads scores through this module too."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

EVAL_DIR = "eval"
RESULTS_FILE = "results.json"
_STEP_DIR = re.compile(r"^step-(\d+)$")


@dataclass(frozen=True)
class Score:
    step: int
    task: str
    metric: str  # lm-eval's key without its filter: acc, bits_per_byte, ...
    value: float
    stderr: float | None


def score_rows(step: int, results: dict[str, Any]) -> list[Score]:
    """One row per task and numeric metric; stderr columns, sample lengths and labels (alias) are not scores."""
    rows = []
    for task, metrics in sorted(results.get("results", {}).items()):
        for key, value in sorted(metrics.items()):
            metric, _, _filter = key.partition(",")
            if (
                metric.endswith("_stderr")
                or metric == "sample_len"
                or not isinstance(value, int | float)
                or isinstance(value, bool)
            ):
                continue
            stderr = metrics.get(f"{metric}_stderr,{_filter}")
            rows.append(Score(step, task, metric, float(value), stderr if isinstance(stderr, int | float) else None))
    return rows


def evaluated_steps(run_dir: Path) -> dict[int, Path]:
    """step -> its results.json, for every evaluated step of the run, in step order."""
    root = run_dir / EVAL_DIR
    found = {}
    if root.is_dir():
        for entry in root.iterdir():
            match = _STEP_DIR.match(entry.name)
            if match and (entry / RESULTS_FILE).is_file():
                found[int(match.group(1))] = entry / RESULTS_FILE
    return dict(sorted(found.items()))


def read_results(path: Path) -> dict[str, Any]:
    """A results.json; OSError or ValueError when it cannot be read as JSON."""
    results = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(results, dict):
        raise ValueError(f"{path}: not a JSON object")
    return results


def run_scores(run_dir: Path) -> list[Score]:
    return [row for step, path in evaluated_steps(run_dir).items() for row in score_rows(step, read_results(path))]
