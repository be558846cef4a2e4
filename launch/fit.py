"""Will the model's training state fit in device memory? Checked before a job asks SLURM for nodes.

Mixed-precision Adam keeps 16 bytes per parameter (2 bf16 weights + 2 bf16 gradients + 12 fp32 master weights,
momentum and variance), sharded over every device of the job (FSDP/ZeRO-3, or TP x PP x ZeRO-1 on Neuron).
Activations, communication buffers and fragmentation need the rest, so only (1 - margin) of each device's memory
is counted as available for the states. For FSDP jobs on accelerators, `check_planner_fit` then asks the
capacity planner's memory model (planner.memory), which also counts activations by checkpointing
policy, the logits, gathered FSDP blocks and the runtime's reserve.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.comment import Plan
from planner.hardware import hardware
from planner.job import Backend, PlanError
from planner.job_config import Layout, planner_job, yaml_field
from planner.memory import fits
from planner.step_time import estimate_step
from slurm.errors import SubmitError
from slurm.target import Target
from training.config import JobConfig
from training.models.args import ModelArgs
from training.models.params import count_parameters

BYTES_PER_PARAM = 16
DEFAULT_MARGIN = 0.25
GIB = 1024**3


@dataclass(frozen=True)
class Fit:
    params: int
    state_bytes: int
    per_device_bytes: float
    usable_bytes_per_device: float
    devices: int
    min_nodes: int

    @property
    def fits(self) -> bool:
        return self.per_device_bytes <= self.usable_bytes_per_device

    def summary(self) -> str:
        return (
            f"{_count(self.params)} params x {BYTES_PER_PARAM} B = {_size(self.state_bytes)} of weights, gradients and "
            f"Adam states over {self.devices} devices: {_size(self.per_device_bytes)} each, "
            f"{_size(self.usable_bytes_per_device)} usable"
        )


def _count(params: int) -> str:
    return f"{params / 1e9:.2f} B" if params >= 1e9 else f"{params / 1e6:.2f} M"


def _size(size: float) -> str:
    return f"{size / GIB:.1f} GiB" if size >= GIB else f"{size / 1024**2:.1f} MiB"


def estimate_fit(
    model: ModelArgs, target: Target, nodes: int, bytes_per_param: int = BYTES_PER_PARAM, margin: float = DEFAULT_MARGIN
) -> Fit:
    if nodes < 1:
        raise SubmitError(f"--nodes: {nodes} must be at least 1")
    if not 0.0 <= margin < 1.0:
        raise SubmitError(f"margin: {margin} must be in [0, 1)")
    params = count_parameters(model).total
    state_bytes = params * bytes_per_param
    devices = target.devices_per_node * nodes
    usable = target.device_memory_gib * GIB * (1.0 - margin)
    per_node_usable = usable * target.devices_per_node
    min_nodes = math.ceil(state_bytes / per_node_usable) if per_node_usable > 0 else 0
    return Fit(params, state_bytes, state_bytes / devices, usable, devices, min_nodes)


def check_fits(
    model: ModelArgs,
    target: Target,
    nodes: int,
    bytes_per_param: int = BYTES_PER_PARAM,
    margin: float = DEFAULT_MARGIN,
    model_name: str = "model",
) -> Fit:
    """The fit estimate; raises SubmitError (one line, with the smallest node count that fits) when it does not."""
    fit = estimate_fit(model, target, nodes, bytes_per_param, margin)
    if fit.usable_bytes_per_device <= 0:
        raise SubmitError(f"--queue: {target.instance.name} reports no device memory to train in")
    if not fit.fits:
        raise SubmitError(
            f"--nodes: {model_name} does not fit on {nodes} x {target.instance.name}: {fit.summary()}; "
            f"use at least {fit.min_nodes} nodes"
        )
    return fit


def check_global_batch(job: JobConfig, data_parallel: int) -> None:
    """Every backend splits a step's sequences over its data-parallel ranks in whole micro-batches; a job that cannot
    died at start (exit 2, not requeued). Refused before SLURM is asked for nodes."""
    if job.data.global_batch_size % (job.data.micro_batch_size * data_parallel):
        raise SubmitError(
            f"data.global_batch_size: {job.data.global_batch_size} is not a multiple of micro_batch_size x "
            f"data-parallel size ({job.data.micro_batch_size} x {data_parallel})"
        )


def check_planner_fit(model: ModelArgs, target: Target, nodes: int, job: JobConfig, model_name: str = "model") -> str:
    """The planner's verdict for an FSDP job on GPUs or Trainium, made for the job as written (planner.job_config);
    raises SubmitError when its batch cannot be split over the ranks or its memory does not fit."""
    try:
        planned = planner_job(job, model, hardware(target.instance.name), nodes)
    except PlanError as error:
        raise SubmitError(f"--model: {model_name} on {nodes} x {target.instance.name}: {yaml_field(error)}") from None
    ok, message = fits(planned)
    if not ok:
        raise SubmitError(f"--nodes: {model_name} on {nodes} x {target.instance.name} {message}")
    return message


def planned_cost(
    model: ModelArgs,
    target: Target,
    nodes: int,
    job: JobConfig,
    usd_per_node_hour: float | None = None,
    backend: Backend = "fsdp",
    layout: Layout | None = None,
) -> Plan | None:
    """The planner's hours and dollars for the whole run (train.max_steps steps) on the job's backend and layout, for
    the job's comment: llm-report sets it next to what sacct measured. None when the planner cannot time the job's
    layout: that never fails a submission (check_planner_fit and each backend's own checks refuse what cannot run)."""
    try:
        node = hardware(target.instance.name, usd_per_hour=usd_per_node_hour)
        planned = planner_job(job, model, node, nodes, layout or Layout(), backend=backend)
    except PlanError:
        return None
    step = estimate_step(planned)
    hours = job.train.max_steps * step.step_s / 3600
    usd = hours * nodes * planned.hardware.usd_per_node_hour
    return Plan(usd=usd, hours=hours, steps=job.train.max_steps, backend=backend)
