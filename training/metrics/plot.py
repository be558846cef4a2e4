"""End-of-run PNG: training and validation loss, and throughput per device, from metrics.jsonl."""

from __future__ import annotations

from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from training.metrics.logger import METRICS_FILE, latest_per_step, read_metrics

PLOT_FILE = "metrics.png"


def plot_run(run_dir: Path) -> Path | None:
    records = read_metrics(run_dir / METRICS_FILE)
    train = [r for r in latest_per_step(records, "train") if isinstance(r.get("loss"), float)]
    if not train:
        return None
    validation = latest_per_step(records, "validation")
    # Agg canvas, no pyplot: no global figure state and no display needed on cluster nodes.
    figure = Figure(figsize=(8, 7))
    FigureCanvasAgg(figure)
    loss_axis, speed_axis = figure.subplots(2, 1, sharex=True)
    loss_axis.plot([r["step"] for r in train], [r["loss"] for r in train], label="train loss", linewidth=1)
    if validation:
        loss_axis.plot(
            [r["step"] for r in validation], [r["val_loss"] for r in validation], "o-", label="validation loss"
        )
    loss_axis.set_ylabel("loss (nats/token)")
    loss_axis.legend()
    loss_axis.grid(alpha=0.3)
    speed_axis.plot([r["step"] for r in train], [r["tokens_per_s"] for r in train], linewidth=1)
    speed_axis.set_ylabel("tokens/s per device")
    speed_axis.set_xlabel("step")
    speed_axis.grid(alpha=0.3)
    figure.suptitle(run_dir.name)
    figure.tight_layout()
    out = run_dir / PLOT_FILE
    figure.savefig(out, dpi=100)
    return out
