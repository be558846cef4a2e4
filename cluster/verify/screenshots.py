"""PNG pictures of the dashboards, drawn with matplotlib from the dashboard JSON and a Prometheus' query_range
results (no Grafana here). Each panel's queries run as Grafana would send them (template variables = all)."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from cluster.observability.dashboards import instantiate

_COLUMNS = 2


def _legend(template: str, labels: dict[str, str]) -> str:
    text = template
    for key, value in labels.items():
        text = text.replace("{{" + key + "}}", value)
    return text if "{{" not in text else text.split("{{", 1)[0].strip() or "series"


def render(dashboard: dict[str, Any], query_range: Any, start: float, end: float, out: Path) -> Path:
    """`query_range(expr, start, end, step)` returns Prometheus' matrix result."""
    panels = dashboard["panels"]
    rows = math.ceil(len(panels) / _COLUMNS)
    figure, axes = plt.subplots(rows, _COLUMNS, figsize=(14, 3.2 * rows), squeeze=False)
    step = max(1.0, (end - start) / 200)
    for index, panel in enumerate(panels):
        axis = axes[index // _COLUMNS][index % _COLUMNS]
        axis.set_title(panel["title"], fontsize=10, loc="left")
        drawn = 0
        for target in panel["targets"]:
            for series in query_range(instantiate(target["expr"]), start, end, step):
                times = [datetime.fromtimestamp(float(t), tz=UTC) for t, _ in series["values"]]
                values = [float(v) for _, v in series["values"]]
                axis.plot(times, values, linewidth=1.2, label=_legend(target["legendFormat"], series["metric"]))
                drawn += 1
        if drawn:
            axis.legend(fontsize=7, loc="upper left")
            axis.tick_params(labelsize=7)
            axis.set_ylabel(panel["fieldConfig"]["defaults"]["unit"], fontsize=7)
        else:
            axis.text(
                0.5, 0.5, "no data on this host", ha="center", va="center", transform=axis.transAxes, color="grey"
            )
            axis.set_xticks([])
            axis.set_yticks([])
    for index in range(len(panels), rows * _COLUMNS):
        axes[index // _COLUMNS][index % _COLUMNS].axis("off")
    figure.suptitle(f"{dashboard['title']} (rendered from the dashboard JSON and a local Prometheus)", fontsize=12)
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=80)
    plt.close(figure)
    return out
