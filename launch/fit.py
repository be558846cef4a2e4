"""Will the job fit in device memory? Checked before a job asks SLURM for nodes, on every backend.

One memory model decides, the capacity planner's (planner.memory: training state by sharding and LoRA, activations
by checkpointing policy, the logits, gathered FSDP blocks and the runtime's reserve), for the job as written
(planner.job_config.planner_job) on the backend's stack and model-parallel layout: `llm-plan --model job.yaml`
and `llm-submit` give the same figure. The local CPU cluster's node is planned as one device holding the node's
memory (planner.hardware.LOCAL_HARDWARE, `llm-plan --instance local-cpu`); the planner times nothing there.
"""

from __future__ import annotations

import dataclasses
import math

from planner.comment import Plan
from planner.hardware import LOCAL_HARDWARE, Hardware, hardware
from planner.job import Backend, Job, PlanError
from planner.job_config import YAML_FIELDS, planner_job
from planner.memory import fits
from planner.step_time import estimate_step
from slurm.errors import SubmitError
from slurm.target import Target
from training.config import JobConfig
from training.models.args import ModelArgs
from training.parallel.dims import ParallelDims

# How far the refusal looks for a node count that fits (a model that needs more has no useful hint).
MAX_SUGGESTED_NODES = 1024
# The planner's name for a layout field -> llm-submit's flag; the job's own fields keep their YAML names.
SUBMIT_FIELDS = {
    **YAML_FIELDS,
    "tensor_parallel": "--tensor-parallel",
    "pipeline_parallel": "--pipeline-parallel",
    "context_parallel": "--context-parallel",
    "nodes": "--nodes",
}


def planner_hardware(target: Target, usd_per_node_hour: float | None = None) -> Hardware:
    return LOCAL_HARDWARE if target.local else hardware(target.instance.name, usd_per_hour=usd_per_node_hour)


def check_global_batch(job: JobConfig, data_parallel: int) -> None:
    """Every backend splits a step's sequences over its data-parallel ranks in whole micro-batches; a job that cannot
    died at start (exit 2, not requeued). Refused before SLURM is asked for nodes."""
    if job.data.global_batch_size % (job.data.micro_batch_size * data_parallel):
        raise SubmitError(
            f"data.global_batch_size: {job.data.global_batch_size} is not a multiple of micro_batch_size x "
            f"data-parallel size ({job.data.micro_batch_size} x {data_parallel})"
        )


def _on_nodes(planned: Job, nodes: int) -> Job | None:
    """The job on `nodes` nodes, its global batch rounded up to whole micro-batches per rank; None if it cannot be
    laid out there."""
    try:
        job = dataclasses.replace(planned, nodes=nodes, global_batch=None)
        unit = job.data_parallel * job.micro_batch
        return dataclasses.replace(job, global_batch=math.ceil(planned.global_batch_sequences / unit) * unit)
    except PlanError:
        return None


def smallest_fitting_nodes(planned: Job) -> Job | None:
    """The job on the fewest nodes above its own on which the planner fits it with its global batch as written;
    failing that, with the global batch rounded up to split there; None when no count up to the limit fits
    (activations, say, that more nodes do not divide)."""
    rounded = None
    for nodes in range(planned.nodes + 1, MAX_SUGGESTED_NODES + 1):
        job = _on_nodes(planned, nodes)
        if job is None or not fits(job)[0]:
            continue
        if job.global_batch == planned.global_batch_sequences:
            return job
        rounded = rounded or job
    return rounded


def _more_nodes_hint(planned: Job) -> str:
    smallest = smallest_fitting_nodes(planned)
    if smallest is None:
        return ""
    hint = f"; use at least {smallest.nodes} nodes"
    if smallest.global_batch != planned.global_batch_sequences:
        unit = smallest.data_parallel * smallest.micro_batch
        hint += f" (with data.global_batch_size a multiple of {unit} there)"
    return hint


def check_fits(
    job: JobConfig,
    model: ModelArgs,
    target: Target,
    nodes: int,
    backend: Backend = "fsdp",
    layout: ParallelDims | None = None,
    model_name: str = "model",
) -> str:
    """The planner's one-line verdict ("fits: X GiB per device, ...") for the job on its backend and layout; raises
    SubmitError (one line) when the planner cannot lay it out or it does not fit, with the smallest node count that
    fits when there is one."""
    where = f"{model_name} on {nodes} x {target.instance.name}"
    try:
        planned = planner_job(job, model, planner_hardware(target), nodes, layout or ParallelDims(), backend=backend)
    except PlanError as error:
        field = SUBMIT_FIELDS.get(error.argument, error.argument)
        raise SubmitError(f"--model: {where}: {field}: {error.value!r} {error.reason}") from None
    ok, message = fits(planned)
    if not ok:
        raise SubmitError(f"--nodes: {where} {message}{_more_nodes_hint(planned)}")
    return message


def planned_cost(
    model: ModelArgs,
    target: Target,
    nodes: int,
    job: JobConfig,
    usd_per_node_hour: float | None = None,
    backend: Backend = "fsdp",
    layout: ParallelDims | None = None,
) -> Plan | None:
    """The planner's hours and dollars for the whole run (train.max_steps steps) on the job's backend and layout, for
    the job's comment: llm-report sets it next to what sacct measured. None when the planner cannot time the job's
    layout: that never fails a submission (check_fits and each backend's own checks refuse what cannot run)."""
    try:
        node = hardware(target.instance.name, usd_per_hour=usd_per_node_hour)
        planned = planner_job(job, model, node, nodes, layout or ParallelDims(), backend=backend)
    except PlanError:
        return None
    step = estimate_step(planned)
    hours = job.train.max_steps * step.step_s / 3600
    usd = hours * nodes * planned.hardware.usd_per_node_hour
    return Plan(usd=usd, hours=hours, steps=job.train.max_steps, backend=backend)
