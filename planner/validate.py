"""Leave-one-source-out validation: fit the free parameters on every source but one, predict that one, repeat.

    python -m planner.validate           # print the per-layout report
    python -m planner.validate --write   # also replace the report in docs/planner.md

A source is one publication (published.SOURCES); its rows are never in the fit that predicts them. The fit is the
committed calibration's (same fitted rows, same loss) minus the left-out source. A parameter that no remaining row
constrains (Trainium's matmul fraction without the Trainium NeoX/Pythia blog) cannot be predicted: those rows are
reported as such and left out of the error. Errors are grouped by backend (fsdp, nemo, neuron: each has its own
fitted efficiency), parallel layout (fsdp, hsdp, ddp, zero1, tp/pp, tp/pp/cp) and precision (bf16, fp8). The target is
a mean absolute error of at most 15 % on every group with rows from two or more sources; a group with one source is
marked so and is not validated; a group over 15 % must have its explanation in docs/planner.md (EXPLAINED), which
names the source that would settle it. Rows held out of every fit (torchtitan's float8 and pipeline rows) are
predicted by the refit without their source like the rest.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from planner.calibration import CALIBRATED, Efficiency
from planner.compare import Comparison, compare_table
from planner.fit import constrained_parameters, fit, fitted_rows, rounded, row_parameters
from planner.published import ALL_ROWS, SOURCES, TABLES, PublishedRow
from slurm.backends import STACKS
from spec.cli import OneLineParser, user_errors

TARGET = 0.15
REPORT_START = "<!-- leave-one-source-out:start (python -m planner.validate --write) -->"
REPORT_END = "<!-- leave-one-source-out:end -->"
DEFAULT_DOC = Path("docs/planner.md")
BACKENDS = tuple(STACKS)  # each stack's rates are fitted and validated on their own
LAYOUTS = ("fsdp", "hsdp", "ddp", "zero1", "tp/pp", "tp/pp/cp")
PRECISIONS = ("bf16", "fp8")
Group = tuple[str, str, str]  # (backend, layout, precision)
GROUPS: tuple[Group, ...] = tuple((b, layout, p) for b in BACKENDS for layout in LAYOUTS for p in PRECISIONS)


@dataclass(frozen=True)
class Explanation:
    anchor: str  # a heading in docs/planner.md that explains the miss
    reason: str


# Groups that miss the 15 % target, each with the docs section that says why (a test keeps both current).
ANCHOR = "### Where the planner misses"
EXPLAINED: dict[Group, Explanation] = {
    ("fsdp", "tp/pp", "fp8"): Explanation(
        ANCHOR,
        "torchtitan's 405B pipeline rows (Dec 2024) reach 70 % and 82 % of the rate the planner gives them, while "
        "Megatron Core and Meta's stack on like layouts come within 15 %; the benchmark states neither its stage split nor its "
        "per-micro-batch settings; a second PyTorch-native FP8 pipeline table at that scale would settle it",
    ),
    ("nemo", "fsdp", "fp8"): Explanation(
        ANCHOR,
        "one row, Megatron-Bridge's Llama 3 8B on Megatron FSDP over 8 GPUs, 16 % low with its source left out (the "
        "other nemo FP8 rows are ZeRO-1 or pipelined); a Megatron FSDP table from another publication would settle it",
    ),
}


@dataclass(frozen=True)
class HeldOutPrediction:
    left_out: str  # source key
    comparison: Comparison  # predicted by parameters fitted without the source
    predictable: bool  # False: a parameter the row needs is constrained by this source alone


@dataclass(frozen=True)
class LayoutSummary:
    sources: int  # sources with rows of this layout
    values: int  # predicted values
    unpredictable: int
    mean_error: float
    max_error: float


def refit_without(source: str, start: Efficiency = CALIBRATED, restarts: int = 2) -> tuple[Efficiency, list[str]]:
    """(parameters fitted without `source`, names of the free parameters the remaining rows constrain)."""
    rows = fitted_rows(exclude_source=source)
    return rounded(fit(start, restarts, rows)), constrained_parameters(rows)


def leave_one_source_out(start: Efficiency = CALIBRATED) -> list[HeldOutPrediction]:
    out: list[HeldOutPrediction] = []
    for source in SOURCES:
        if not any(row.source == source for row in ALL_ROWS):
            continue
        efficiency, constrained = refit_without(source, start)
        for table in TABLES:
            if table.source != source:
                continue
            for comparison in compare_table(table, efficiency):
                needed = row_parameters(comparison.row)
                out.append(HeldOutPrediction(source, comparison, all(name in constrained for name in needed)))
    return out


def row_group(row: PublishedRow) -> Group:
    return row.backend, row.layout, row.precision


def _group(prediction: HeldOutPrediction) -> Group:
    return row_group(prediction.comparison.row)


def layout_summary(predictions: Sequence[HeldOutPrediction]) -> dict[Group, LayoutSummary]:
    summary: dict[Group, LayoutSummary] = {}
    for group in GROUPS:
        chosen = [p for p in predictions if _group(p) == group]
        if not chosen:
            continue
        errors = [abs(p.comparison.error) for p in chosen if p.predictable]
        sources = len({row.source for row in ALL_ROWS if row_group(row) == group})
        summary[group] = LayoutSummary(
            sources,
            len(errors),
            len(chosen) - len(errors),
            sum(errors) / len(errors) if errors else float("nan"),
            max(errors) if errors else float("nan"),
        )
    return summary


def _verdict(group: Group, s: LayoutSummary) -> str:
    explanation = EXPLAINED.get(group)
    why = f": {explanation.reason} (see below)" if explanation else ""
    if s.sources < 2:
        return "one source: not validated across sources" + (f"; over 15 %{why}" if s.mean_error > TARGET else "")
    if s.mean_error <= TARGET:
        return "met"
    return "NOT met" + why


def targets_met_or_explained(summary: dict[Group, LayoutSummary]) -> bool:
    """Every group with two or more sources meets the target, and every group over it (one source or more) has its
    explanation. A group with no predictable value (nan) has nothing to explain."""
    return all(not s.mean_error > TARGET or group in EXPLAINED for group, s in summary.items()) and all(
        s.mean_error <= TARGET or group in EXPLAINED for group, s in summary.items() if s.sources >= 2
    )


def _percent(value: float) -> str:
    return "n/a" if value != value else f"{value:.1%}"


def markdown_report(predictions: Sequence[HeldOutPrediction]) -> str:
    summary = layout_summary(predictions)
    lines = [
        "| backend | layout | precision | sources | values predicted | mean error | max error | target (<= 15 % "
        "where 2+ sources) |",
        "|---|---|---|---:|---:|---:|---:|---|",
    ]
    for group, s in summary.items():
        verdict = _verdict(group, s)
        values = f"{s.values}" + (f" (+{s.unpredictable} not predictable)" if s.unpredictable else "")
        lines.append(
            f"| {' | '.join(group)} | {s.sources} | {values} | {_percent(s.mean_error)} | "
            f"{_percent(s.max_error)} | {verdict} |"
        )
    lines += ["", "| left out | group: mean error (values) |", "|---|---|"]
    for source in SOURCES:
        chosen = [p for p in predictions if p.left_out == source]
        if not chosen:
            continue
        parts = []
        for group in GROUPS:
            name = " ".join(group)
            errors = [abs(p.comparison.error) for p in chosen if _group(p) == group and p.predictable]
            skipped = sum(1 for p in chosen if _group(p) == group and not p.predictable)
            if errors:
                parts.append(f"{name} {sum(errors) / len(errors):.1%} ({len(errors)})")
            if skipped:
                parts.append(f"{name} not predictable ({skipped}: its matmul fraction has no other source)")
        lines.append(f"| {SOURCES[source].name} | {'; '.join(parts)} |")
    return "\n".join(lines)


def write_report(doc: Path, report: str) -> None:
    text = doc.read_text()
    start, end = text.index(REPORT_START), text.index(REPORT_END)
    doc.write_text(text[: start + len(REPORT_START)] + "\n" + report + "\n" + text[end:])


@user_errors
def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m planner.validate", description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help=f"replace the report in {DEFAULT_DOC}")
    parser.add_argument("--doc", type=Path, default=DEFAULT_DOC)
    options = parser.parse_args(argv)
    predictions = leave_one_source_out()
    report = markdown_report(predictions)
    print(report)
    if options.write:
        write_report(options.doc, report)
    return 0 if targets_met_or_explained(layout_summary(predictions)) else 1


if __name__ == "__main__":
    sys.exit(main())
