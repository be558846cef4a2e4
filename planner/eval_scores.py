"""The latest evaluation of a run for llm-report: RUN/eval/step-N/results.json as llm-eval writes it (lm-eval's own
results format), read here without training/ so the planner stays torch-free."""

from __future__ import annotations

import json
import re
from pathlib import Path

_STEP_DIR = re.compile(r"^step-(\d+)$")


def latest_scores_line(run_dir: Path) -> str:
    """`scores <run> step N: task metric value, ...` for the highest scored step; says so when there is none."""
    steps = sorted(
        (int(match.group(1)), entry / "results.json")
        for entry in (run_dir / "eval").glob("step-*")
        if (match := _STEP_DIR.match(entry.name)) and (entry / "results.json").is_file()
    )
    if not steps:
        return f"scores {run_dir}: none yet (llm-eval writes {run_dir}/eval/step-N/results.json)"
    step, path = steps[-1]
    try:
        results = json.loads(path.read_text(encoding="utf-8")).get("results", {})
    except (OSError, ValueError) as error:
        return f"scores {run_dir}: {path} does not read as lm-eval results ({error})"
    parts = []
    for task, metrics in sorted(results.items()):
        for key, value in sorted(metrics.items()):
            metric = key.split(",", 1)[0]
            if metric.endswith("_stderr") or metric in ("alias", "sample_len") or not isinstance(value, int | float):
                continue
            parts.append(f"{task} {metric} {value:.4g}")
    return f"scores {run_dir} step {step}: " + ", ".join(parts)
