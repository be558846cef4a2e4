"""--signal-lead: derived from what a stop must do before the time limit (planner.stop_window), or checked when given.

Without a spec (the local cluster) or shared storage there is nothing to derive from: the old default stands.
"""

from __future__ import annotations

import math

from planner.hardware import hardware
from planner.job import Backend, PlanError
from planner.job_config import planner_job
from planner.step_time import estimate_step
from planner.stop_window import StopWindow, stop_window
from slurm.errors import SubmitError
from slurm.target import Target
from spec.cluster import ClusterSpec, FsxSpec
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


def kill_wait_note(window: StopWindow | None, cluster: ClusterSpec | None) -> str | None:
    """A warning when the job's stop outlasts the cluster's KillWait (set from cluster.stop_save): a TERM (scancel,
    a preemption) would kill the stop's save before it is on the file system."""
    if window is None or cluster is None or cluster.fsx is None:
        return None
    kill_wait = cluster.stop_save.kill_wait_s(cluster.fsx)
    if window.lead_s <= kill_wait:
        return None
    return (
        f"warning: this job's stop needs {window.lead_s} s but the cluster's KillWait is {kill_wait} s: a TERM would "
        f"kill its save; set cluster.stop_save to checkpoint_gb {math.ceil(window.checkpoint_bytes / 1e9)}, step_s "
        f"{math.ceil(window.step_s)} and deploy (docs/jobs.md, KillWait)"
    )


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
