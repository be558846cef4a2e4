"""The same training job under each parallel layout a user would weigh: FSDP, HSDP (per node, per two nodes),
tensor parallel inside a node with FSDP over the rest, and Megatron-style TP x PP (interleaved) x CP with the
distributed optimizer (ZeRO-1) over DP x CP. `python -m planner.plan --compare` prints them ranked: layouts that
fit first, then the most tokens per second (for one model, node count and global batch that is also the fewest
days and dollars).

Every layout trains the same global batch (the job's, or one micro-batch per device under FSDP) in the same number
of micro-batches per step: a TP group of t devices takes t times the micro-batch (the same sequences per device,
its activations split t ways), so tokens per step, and days and dollars for a token budget, compare like for
like.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from planner.cost import CostEstimate, job_cost
from planner.job import Job, PlanError, unsubmittable_dims
from planner.memory import MemoryEstimate, job_memory
from planner.step_time import StepEstimate, estimate_step


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


def _interleave(n_layers: int, pp: int, micro_batches: int) -> int:
    """Model chunks per stage for Megatron's interleaved 1F1B: the most (up to 8) that split a stage's blocks evenly,
    where the schedule allows it (micro-batches a multiple of PP)."""
    if pp == 1 or micro_batches % pp:
        return 1
    blocks = -(-n_layers // pp)
    return max(v for v in range(1, 9) if blocks % v == 0 and blocks // v >= 1)


def _megatron_layout(job: Job, tp: int, pp: int, cp: int) -> Job | None:
    try:
        base = dataclasses.replace(
            job,
            tensor_parallel=tp,
            pipeline_parallel=pp,
            context_parallel=cp,
            software=dataclasses.replace(job.software, sharding="zero1", pipeline_interleave=1),
            shard_group=None,
            global_batch=job.global_batch_sequences,
        )
        v = _interleave(job.model.n_layers, pp, base.micro_batches_per_step)
        return dataclasses.replace(base, software=dataclasses.replace(base.software, pipeline_interleave=v))
    except PlanError:
        return None


def megatron_layouts(job: Job) -> list[tuple[str, Job]]:
    """TP inside a node (2, 4, 8) x PP (1 ... 32 stages) x CP (1, 2, 4 where the sequence allows): the layouts of
    NVIDIA's and torchtitan's large-model recipes."""
    per_node = job.hardware.devices_per_node
    out = []
    for tp in (t for t in (2, 4, 8) if t <= per_node and per_node % t == 0):
        for pp in (p for p in (1, 2, 4, 8, 16, 32) if p <= job.model.n_layers):
            for cp in (c for c in (1, 2, 4) if c == 1 or job.seq_len >= 4096 * c):
                if tp * pp * cp == 1 or tp * pp * cp > job.world_size:
                    continue
                candidate = _megatron_layout(job, tp, pp, cp)
                if candidate is None:
                    continue
                v = candidate.software.pipeline_interleave
                name = f"tp {tp} x pp {pp}" + (f" (v {v})" if v > 1 else "") + (f" x cp {cp}" if cp > 1 else "")
                out.append((name + " + zero1", candidate))
    return out


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
    return out + megatron_layouts(job)


def ranked(plans: list[LayoutPlan]) -> list[LayoutPlan]:
    """Layouts that fit first, each group fastest first (same devices and global batch: fastest is cheapest)."""
    return sorted(plans, key=lambda plan: (not plan.memory.fits, -plan.step.tokens_per_s_per_device))


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


def _submits(job: Job) -> str:
    """Whether llm-submit's backend for the job's stack lays this out: yes, or which dimension it lacks."""
    dims = unsubmittable_dims(job)
    return "yes" if not dims else f"no ({' x '.join(d.upper() for d in dims)}: not on this stack's backend)"


def render_table(plans: list[LayoutPlan], limit: int | None = None) -> str:
    """One line per layout, numbered in the given order; with `limit`, the first `limit` and a count of the rest."""
    lines = [
        "| rank | layout | fits (GiB/device) | step (s) | tokens/s/device | MFU | bubble (s) | exposed DP comm (s) "
        "| days | $ | llm-submit runs it |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    shown = plans if limit is None else plans[:limit]
    for rank, plan in enumerate(shown, 1):
        fits = f"{'yes' if plan.memory.fits else 'NO'} ({plan.memory.total_gib:.1f}/{plan.memory.capacity_gib:.0f})"
        lines.append(
            f"| {rank} | {plan.name} | {fits} | {plan.step.step_s:.3f} | {plan.step.tokens_per_s_per_device:,.0f} | "
            f"{plan.step.mfu:.1%} | {plan.step.pipeline_bubble_s:.3f} | {plan.step.data_parallel_exposed_s:.3f} | "
            f"{_days(plan.cost.days)} | {_money(plan.cost.usd)} | {_submits(plan.job)} |"
        )
    rest = plans[len(shown) :]
    if rest:
        unfit = sum(1 for plan in rest if not plan.memory.fits)
        lines.append(f"\n{len(rest)} more layouts not shown ({unfit} of them do not fit); --json lists every one")
    return "\n".join(lines)


def as_json(plans: list[LayoutPlan]) -> list[dict[str, object]]:
    return [
        {
            "layout": plan.name,
            "tensor_parallel": plan.job.tensor_parallel,
            "pipeline_parallel": plan.job.pipeline_parallel,
            "pipeline_interleave": plan.job.software.pipeline_interleave,
            "context_parallel": plan.job.context_parallel,
            "data_parallel": plan.job.data_parallel,
            "sharding": plan.job.software.sharding,
            "shard_group": plan.job.state_shard_size,
            "micro_batches_per_step": plan.job.micro_batches_per_step,
            "fits": plan.memory.fits,
            "submittable": not unsubmittable_dims(plan.job),
            "memory_gib_per_device": plan.memory.total_gib,
            "step_time_s": plan.step.step_s,
            "tokens_per_s_per_device": plan.step.tokens_per_s_per_device,
            "mfu": plan.step.mfu,
            "data_parallel_exposed_s": plan.step.data_parallel_exposed_s,
            "pipeline_bubble_s": plan.step.pipeline_bubble_s,
            "cost_per_hour_usd": plan.cost.usd_per_hour,
            "days": plan.cost.days,
            "cost_usd": plan.cost.usd,
        }
        for plan in plans
    ]
