"""Scores of a run's evaluated checkpoints (RUN/eval/step-N/results.json, lm-eval's format): rows, a Markdown
table, and with several steps a plot of each metric against the step (Agg canvas, as training.metrics.plot)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from training.evaluate.harness import RESULTS_FILE

EVAL_DIR = "eval"
TABLE_FILE = "scores.md"
PLOT_FILE = "scores.png"
_STEP_DIR = re.compile(r"^step-(\d+)$")


@dataclass(frozen=True)
class Score:
    step: int
    task: str
    metric: str  # lm-eval's key without its filter: acc, bits_per_byte, ...
    value: float
    stderr: float | None


def score_rows(step: int, results: dict[str, Any]) -> list[Score]:
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
    root = run_dir / EVAL_DIR
    found = {}
    if root.is_dir():
        for entry in root.iterdir():
            match = _STEP_DIR.match(entry.name)
            if match and (entry / RESULTS_FILE).is_file():
                found[int(match.group(1))] = entry / RESULTS_FILE
    return dict(sorted(found.items()))


def run_scores(run_dir: Path) -> list[Score]:
    return [
        row
        for step, path in evaluated_steps(run_dir).items()
        for row in score_rows(step, json.loads(path.read_text(encoding="utf-8")))
    ]


def table(rows: list[Score]) -> str:
    lines = ["| step | task | metric | value | stderr |", "|---:|---|---|---:|---:|"]
    for row in rows:
        stderr = f"{row.stderr:.4f}" if row.stderr is not None else ""
        lines.append(f"| {row.step} | {row.task} | {row.metric} | {row.value:.4f} | {stderr} |")
    return "\n".join(lines) + "\n"


def plot(rows: list[Score], title: str, out: Path) -> Path | None:
    """One panel per task and metric, its value at each evaluated step; None with fewer than two steps."""
    if len({row.step for row in rows}) < 2:
        return None
    series: dict[tuple[str, str], list[Score]] = {}
    for row in rows:
        series.setdefault((row.task, row.metric), []).append(row)
    figure = Figure(figsize=(8, 2.6 * len(series)))
    FigureCanvasAgg(figure)
    axes = figure.subplots(len(series), 1, sharex=True, squeeze=False)[:, 0]
    for axis, ((task, metric), points) in zip(axes, sorted(series.items()), strict=True):
        axis.plot([p.step for p in points], [p.value for p in points], "o-")
        axis.set_ylabel(f"{task}\n{metric}")
        axis.grid(alpha=0.3)
    axes[-1].set_xlabel("step")
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(out, dpi=100)
    return out


def write_summary(run_dir: Path) -> list[Path]:
    """RUN/eval/scores.md and, with several steps, RUN/eval/scores.png; returns what was written."""
    rows = run_scores(run_dir)
    root = run_dir / EVAL_DIR
    root.mkdir(parents=True, exist_ok=True)
    (root / TABLE_FILE).write_text(table(rows), encoding="utf-8")
    written = [root / TABLE_FILE]
    figure = plot(rows, run_dir.name, root / PLOT_FILE)
    return written + ([figure] if figure else [])
