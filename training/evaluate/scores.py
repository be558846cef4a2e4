"""Scores of a run's evaluated checkpoints (RUN/eval/step-N/results.json, lm-eval's format): rows, a Markdown
table, and with several steps a plot of each metric against the step (Agg canvas, as training.metrics.plot)."""

from __future__ import annotations

from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from training.evaluate.results import EVAL_DIR, Score, run_scores

TABLE_FILE = "scores.md"
PLOT_FILE = "scores.png"


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
