"""Dollars and days from throughput and the hourly price of the nodes."""

from __future__ import annotations

from dataclasses import dataclass

from planner.job import Job
from planner.step_time import StepEstimate

SECONDS_PER_DAY = 86_400.0


@dataclass(frozen=True)
class CostEstimate:
    usd_per_hour: float  # the whole cluster
    tokens_per_usd: float
    days: float | None  # for the requested token count
    usd: float | None


def job_cost(job: Job, step: StepEstimate, tokens: float | None = None) -> CostEstimate:
    usd_per_hour = job.nodes * job.hardware.usd_per_node_hour
    tokens_per_hour = step.tokens_per_s * 3600
    tokens_per_usd = tokens_per_hour / usd_per_hour if usd_per_hour > 0 else float("inf")
    days = usd = None
    if tokens is not None:
        seconds = tokens / step.tokens_per_s
        days = seconds / SECONDS_PER_DAY
        usd = seconds / 3600 * usd_per_hour
    return CostEstimate(usd_per_hour, tokens_per_usd, days, usd)
