"""--signal-lead: derived from what a stop must do before the time limit (planner.stop_window), or checked when given.

Without a spec (the local cluster) or shared storage there is nothing to derive from: the old default stands.
"""

from __future__ import annotations

from planner.hardware import hardware
from planner.job import Backend, PlanError
from planner.job_config import planner_job
from planner.step_time import estimate_step
from planner.stop_window import StopWindow, stop_window
from slurm.errors import SubmitError
from slurm.target import Target
from spec.cluster import FsxSpec
from training.config import JobConfig
from training.models.args import ModelArgs
from training.parallel.dims import ParallelDims

DEFAULT_SIGNAL_LEAD = 300


def planned_step_s(
    job: JobConfig, model: ModelArgs, target: Target, nodes: int, layout: ParallelDims, backend: Backend = "fsdp"
) -> float:
    """The planner's step time for the job's backend and layout; 0 where the planner cannot time it (the save still
    counts)."""
    try:
        planned = planner_job(job, model, hardware(target.instance.name), nodes, layout, backend=backend)
        return estimate_step(planned).step_s
    except PlanError:
        return 0.0


def resolve_signal_lead(given: int | None, backend: str, window: StopWindow | None) -> int:
    if window is None:
        return DEFAULT_SIGNAL_LEAD if given is None else given
    if given is None:
        return max(DEFAULT_SIGNAL_LEAD, window.lead_s)
    if given < window.lead_s:
        raise SubmitError(
            f"--signal-lead: {given} s cannot fit a --backend {backend} stop ({window.summary()}); "
            f"use at least {window.lead_s} or leave it out"
        )
    return given


def job_stop_window(
    job: JobConfig,
    model: ModelArgs,
    target: Target,
    nodes: int,
    backend: str,
    fsx: FsxSpec | None,
    layout: ParallelDims,
) -> StopWindow | None:
    if fsx is None or target.local:
        return None
    step_s = planned_step_s(job, model, target, nodes, layout, backend)
    return stop_window(model, backend, fsx, step_s)
