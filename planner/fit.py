"""Fit the planner's free parameters on the published rows not held out, and print predicted vs published.

    python -m planner.fit            # fit, print the parameters and the comparison table
    python -m planner.fit --check    # exit 1 unless calibration.CALIBRATED is the fitted optimum

The loss is the mean squared log-ratio of predicted to published over the fitted rows: a row's compared metrics
are averaged, a source's rows are averaged, and every source weighs the same, so a long table (llm-foundry's)
does not outvote a short one. Nelder-Mead on unconstrained coordinates (logit for fractions, log for
byte counts) so every trial is physical.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence

from planner.calibration import CALIBRATED, Efficiency
from planner.compare import compare_all, predicted_metrics
from planner.published import TABLES, PublishedRow
from spec.cli import OneLineParser, user_errors

# name -> (lower, upper) bounds of the physical value
FREE_PARAMETERS: dict[str, tuple[float, float]] = {
    **{f"matmul_fraction.{key}": (0.05, 1.0) for key in CALIBRATED.matmul_fraction},
    **{f"elementwise_bytes_per_hidden.{key}": (1.0, 5000.0) for key in CALIBRATED.elementwise_bytes_per_hidden},
    # NCCL's bus bandwidth stays under line rate (protocol headers, flow control); the tables leave the value weakly
    # determined (docs/planner.md), so the bound matters.
    "network_efficiency": (0.05, 0.9),
    "tp_overlap_fraction": (0.0, 1.0),
    **{f"overlap_fraction.{key}": (0.0, 1.0) for key in CALIBRATED.overlap_fraction},
}


def row_parameters(row: PublishedRow) -> tuple[str, ...]:
    """The stack's parameters a row depends on: its backend's matmul fraction on its die, its elementwise kernels,
    its backend's data-parallel overlap where it has data-parallel peers, and the TP overlap where its stack overlaps
    TP collectives."""
    software = row.job.software
    names: tuple[str, ...] = (
        f"matmul_fraction.{software.backend}.{row.job.hardware.accelerator.compute_die}",
        f"elementwise_bytes_per_hidden.{software.kernels}",
    )
    if software.dp_overlap and row.job.world_size > row.job.tensor_parallel:
        names += (f"overlap_fraction.{software.backend}",)
    return names + (("tp_overlap_fraction",) if software.tp_overlap and row.job.tensor_parallel > 1 else ())


def _to_unbounded(value: float, bounds: tuple[float, float]) -> float:
    low, high = bounds
    share = min(max((value - low) / (high - low), 1e-6), 1 - 1e-6)
    return math.log(share / (1 - share))


def _to_bounded(x: float, bounds: tuple[float, float]) -> float:
    low, high = bounds
    return low + (high - low) / (1 + math.exp(-x))


def fitted_rows(exclude_source: str | None = None) -> list[tuple[PublishedRow, tuple[str, ...]]]:
    """Rows the parameters are fitted on: not held out, and not from `exclude_source` (leave-one-source-out)."""
    return [
        (row, table.compared)
        for table in TABLES
        for row in table.rows
        if not row.holdout and row.source != exclude_source
    ]


def loss(efficiency: Efficiency, rows: Sequence[tuple[PublishedRow, tuple[str, ...]]] | None = None) -> float:
    rows = fitted_rows() if rows is None else rows
    by_source: dict[str, list[float]] = {}
    for row, metrics in rows:
        predicted = predicted_metrics(row, efficiency)
        used = [m for m in metrics if m in row.published]
        error = sum(math.log(predicted[m] / row.published[m]) ** 2 for m in used) / len(used)
        by_source.setdefault(row.source, []).append(error)
    return sum(sum(errors) / len(errors) for errors in by_source.values()) / len(by_source)


def nelder_mead(
    function: Callable[[list[float]], float], start: list[float], step: float = 0.5, iterations: int = 600
) -> list[float]:
    points = [list(start)]
    for index in range(len(start)):
        point = list(start)
        point[index] += step
        points.append(point)
    values = [function(p) for p in points]
    for _ in range(iterations):
        order = sorted(range(len(points)), key=values.__getitem__)
        points, values = [points[i] for i in order], [values[i] for i in order]
        if values[-1] - values[0] < 1e-12:
            break
        centroid = [sum(p[i] for p in points[:-1]) / (len(points) - 1) for i in range(len(start))]
        worst = points[-1]
        reflected = [c + (c - w) for c, w in zip(centroid, worst, strict=True)]
        value = function(reflected)
        if value < values[0]:
            expanded = [c + 2 * (c - w) for c, w in zip(centroid, worst, strict=True)]
            expanded_value = function(expanded)
            points[-1], values[-1] = (expanded, expanded_value) if expanded_value < value else (reflected, value)
        elif value < values[-2]:
            points[-1], values[-1] = reflected, value
        else:
            contracted = [c + 0.5 * (w - c) for c, w in zip(centroid, worst, strict=True)]
            contracted_value = function(contracted)
            if contracted_value < values[-1]:
                points[-1], values[-1] = contracted, contracted_value
            else:
                best = points[0]
                points = [best] + [[b + 0.5 * (p - b) for b, p in zip(best, q, strict=True)] for q in points[1:]]
                values = [values[0]] + [function(p) for p in points[1:]]
    return points[min(range(len(points)), key=values.__getitem__)]


def constrained_parameters(rows: Sequence[tuple[PublishedRow, tuple[str, ...]]]) -> list[str]:
    """Free parameters the rows say something about: a backend's matmul fraction on a die needs a row of that
    backend on that die, a kernel set's elementwise bytes a row running those kernels."""
    used = {name for row, _ in rows for name in row_parameters(row)}
    per_stack = ("matmul_fraction.", "elementwise_bytes_per_hidden.", "tp_overlap_fraction", "overlap_fraction.")
    return [name for name in FREE_PARAMETERS if not name.startswith(per_stack) or name in used]


def fit(
    start: Efficiency = CALIBRATED,
    restarts: int = 3,
    rows: Sequence[tuple[PublishedRow, tuple[str, ...]]] | None = None,
) -> Efficiency:
    """Nelder-Mead over the parameters `rows` constrain (the others keep their value from `start`)."""
    rows = fitted_rows() if rows is None else rows
    names = constrained_parameters(rows)

    def build(x: Sequence[float]) -> Efficiency:
        values = {name: _to_bounded(v, FREE_PARAMETERS[name]) for name, v in zip(names, x, strict=True)}
        return start.replace(**values)

    flat = start.as_flat_dict()
    x = [_to_unbounded(flat[name], FREE_PARAMETERS[name]) for name in names]
    for _ in range(restarts):  # restart from the best point: Nelder-Mead can stall on a collapsed simplex
        x = nelder_mead(lambda trial: loss(build(trial), rows), x)
    return build(x)


def rounded(efficiency: Efficiency) -> Efficiency:
    return efficiency.replace(**{name: round(value, 3) for name, value in efficiency.as_flat_dict().items()})


def report(efficiency: Efficiency) -> str:
    lines = [f"loss (mean squared log-ratio, fitted rows): {loss(efficiency):.5f}"]
    lines += [f"  {name} = {value:.3f}" for name, value in efficiency.as_flat_dict().items()]
    lines.append("")
    for comparison in compare_all(efficiency):
        held = "held out" if comparison.row.holdout else "fitted"
        lines.append(
            f"{comparison.row.key:20s} {comparison.metric:24s} published {comparison.published:>12.4g} "
            f"predicted {comparison.predicted:>12.4g} {comparison.error:+7.1%} {held}"
        )
    return "\n".join(lines)


@user_errors
def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m planner.fit", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="fail unless CALIBRATED is the fitted optimum")
    options = parser.parse_args(argv)
    fitted = rounded(fit())
    if options.check:
        gap = loss(CALIBRATED) - loss(fitted)
        print(f"committed loss {loss(CALIBRATED):.5f}, refitted {loss(fitted):.5f}")
        return 1 if gap > 1e-3 else 0
    print(report(fitted))
    return 0


if __name__ == "__main__":
    sys.exit(main())
