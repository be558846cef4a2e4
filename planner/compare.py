"""Predicted versus published, row by row: what the tests, the fit, docs/planner.md and the plot all read."""

from __future__ import annotations

from dataclasses import dataclass

from planner.calibration import CALIBRATED, Efficiency
from planner.cost import job_cost
from planner.published import ALL_ROWS, TABLES, PublishedRow, PublishedTable
from planner.step_time import StepEstimate, estimate_step
from training.models.params import count_parameters


@dataclass(frozen=True)
class Comparison:
    row: PublishedRow
    metric: str
    published: float
    predicted: float
    tolerance: float

    @property
    def ratio(self) -> float:
        return self.predicted / self.published

    @property
    def error(self) -> float:
        return self.ratio - 1.0

    @property
    def within_tolerance(self) -> bool:
        return abs(self.error) <= self.tolerance


def predicted_metrics(row: PublishedRow, efficiency: Efficiency = CALIBRATED) -> dict[str, float]:
    step = estimate_step(row.job, efficiency)
    metrics = _metrics(row, step)
    if row.table == "ddp-scaling":
        base = next(r for r in ALL_ROWS if r.table == "ddp-scaling" and r.job.nodes == 1)
        base_step = estimate_step(base.job, efficiency)
        metrics["speedup"] = step.tokens_per_s / base_step.tokens_per_s
    return metrics


def _metrics(row: PublishedRow, step: StepEstimate) -> dict[str, float]:
    cost = job_cost(row.job, step)
    return {
        "tokens_per_s_per_device": step.tokens_per_s_per_device,
        "mfu": step.mfu,
        "hfu": step.hfu,
        "tflops_per_device": step.megatron_tflops_per_device,
        "percent_of_peak": 100 * step.megatron_tflops_per_device * 1e12 / step.peak_flops_per_device,
        "sequences_per_s": step.tokens_per_s / row.job.seq_len,
        "tokens_per_usd": cost.tokens_per_usd,
        "cluster_usd_per_hour": cost.usd_per_hour,
        "params_billion": count_parameters(row.job.model).total / 1e9,
    }


def compare_table(table: PublishedTable, efficiency: Efficiency = CALIBRATED) -> list[Comparison]:
    out: list[Comparison] = []
    for row in table.rows:
        predicted = predicted_metrics(row, efficiency)
        for metric in table.compared:
            if metric in row.published:
                tolerance = row.tolerance or table.tolerance
                out.append(Comparison(row, metric, row.published[metric], predicted[metric], tolerance))
    return out


def compare_all(efficiency: Efficiency = CALIBRATED) -> list[Comparison]:
    return [comparison for table in TABLES for comparison in compare_table(table, efficiency)]
