"""The same training job under each parallel layout a user would weigh: FSDP, HSDP (per node, per two nodes),
tensor parallel inside a node with FSDP over the rest. `python -m training.plan --compare` prints them.

Every layout trains the same global batch (the job's, or one micro-batch per device under FSDP) in the same number
of micro-batches per step: a TP group of t devices takes t times the micro-batch (the same sequences per device,
its activations split t ways), so tokens per step, and days and dollars for a token budget, compare like for
like.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from training.planner.cost import CostEstimate, job_cost
from training.planner.job import Job, PlanError
from training.planner.memory import MemoryEstimate, job_memory
from training.planner.step_time import StepEstimate, estimate_step


@dataclass(frozen=True)
class LayoutPlan:
    name: str
    job: Job
    memory: MemoryEstimate
    step: StepEstimate
    cost: CostEstimate


def _layout(job: Job, name: str, tensor_parallel: int, sharding: str, shard_group: int | None) -> Job | None:
    software = dataclasses.replace(job.software, sharding=sharding)  # type: ignore[arg-type]
    try:
        return dataclasses.replace(
            job,
            micro_batch=job.micro_batch * tensor_parallel // job.tensor_parallel,
            tensor_parallel=tensor_parallel,
            pipeline_parallel=1,
            software=software,
            shard_group=shard_group,
            global_batch=job.global_batch_sequences,
        )
    except PlanError:
        return None  # this layout cannot run the job (e.g. the batch does not divide); leave it out


def candidate_layouts(job: Job) -> list[tuple[str, Job]]:
    """(name, job) for each layout that can run the job's model, nodes, sequence and global batch."""
    per_node = job.hardware.devices_per_node
    specs: list[tuple[str, int, str, int | None]] = [("fsdp", 1, "fsdp", None)]
    if job.nodes > 1:
        specs.append((f"hsdp (shard {per_node}: one node)", 1, "hsdp", per_node))
    if job.nodes >= 4 and job.nodes % 2 == 0:
        specs.append((f"hsdp (shard {2 * per_node}: two nodes)", 1, "hsdp", 2 * per_node))
    for tp in (2, 4, 8):
        if tp <= per_node and per_node % tp == 0:
            specs.append((f"tp {tp} + fsdp", tp, "fsdp", None))
    out = []
    for name, tp, sharding, shard in specs:
        candidate = _layout(job, name, tp, sharding, shard)
        if candidate is not None:
            out.append((name, candidate))
    return out


def compare_layouts(job: Job, tokens: float | None = None) -> list[LayoutPlan]:
    plans = []
    for name, candidate in candidate_layouts(job):
        step = estimate_step(candidate)
        plans.append(LayoutPlan(name, candidate, job_memory(candidate), step, job_cost(candidate, step, tokens)))
    return plans


def _money(value: float | None) -> str:
    return "-" if value is None else f"${value:,.0f}"


def _days(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def render_table(plans: list[LayoutPlan]) -> str:
    lines = [
        "| layout | fits (GiB/device) | step (s) | tokens/s/device | MFU | exposed DP comm (s) | days | $ |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for plan in plans:
        fits = f"{'yes' if plan.memory.fits else 'NO'} ({plan.memory.total_gib:.1f}/{plan.memory.capacity_gib:.0f})"
        lines.append(
            f"| {plan.name} | {fits} | {plan.step.step_s:.3f} | {plan.step.tokens_per_s_per_device:,.0f} | "
            f"{plan.step.mfu:.1%} | {plan.step.data_parallel_exposed_s:.3f} | {_days(plan.cost.days)} | "
            f"{_money(plan.cost.usd)} |"
        )
    return "\n".join(lines)


def as_json(plans: list[LayoutPlan]) -> list[dict[str, object]]:
    return [
        {
            "layout": plan.name,
            "tensor_parallel": plan.job.tensor_parallel,
            "sharding": plan.job.software.sharding,
            "shard_group": plan.job.state_shard_size,
            "micro_batches_per_step": plan.job.micro_batches_per_step,
            "fits": plan.memory.fits,
            "memory_gib_per_device": plan.memory.total_gib,
            "step_time_s": plan.step.step_s,
            "tokens_per_s_per_device": plan.step.tokens_per_s_per_device,
            "mfu": plan.step.mfu,
            "data_parallel_exposed_s": plan.step.data_parallel_exposed_s,
            "cost_per_hour_usd": plan.cost.usd_per_hour,
            "days": plan.cost.days,
            "cost_usd": plan.cost.usd,
        }
        for plan in plans
    ]
