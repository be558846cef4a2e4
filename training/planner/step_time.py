"""Step time from FLOPs, bytes and links. Pure arithmetic over a Job and the Efficiency parameters.

Per micro-batch and device:
  matmul time        = hardware FLOPs / (peak x matmul_fraction[die])
  memory-bound time  = (elementwise bytes + materialized attention bytes + logits bytes) / HBM bandwidth
  tensor-parallel    = activation all-reduces over NVLink/NeuronLink, on the critical path
  pipeline           = stage sends; the 1F1B bubble adds (p - 1) / v micro-batch times per step; the last stage
                       also runs the output head, so it sets the pace
Per step:
  data parallel      = FSDP all-gathers (forward, backward) and reduce-scatter per micro-batch, or one gradient
                       all-reduce (ddp), or reduce-scatter + all-gather (zero1); hidden behind compute up to
                       overlap_fraction of it, except the first gather and last reduce, which nothing hides
  optimizer          = AdamW bytes per local parameter / HBM bandwidth
"""

from __future__ import annotations

from dataclasses import dataclass

from training.models.params import count_parameters
from training.planner.calibration import (
    CALIBRATED,
    MATERIALIZED_SCORE_BYTES_BACKWARD,
    MATERIALIZED_SCORE_BYTES_FORWARD,
    OPTIMIZER_BYTES_PER_PARAM,
    Efficiency,
)
from training.planner.comms import Group, Transfer, collective, point_to_point
from training.planner.flops import hardware_flops_per_token, megatron_flops_per_token, model_flops_per_token
from training.planner.job import Job
from training.planner.memory import BF16, LOGIT_BYTES_PER_ELEMENT

BACKWARD_SHARE = 2.0 / 3.0  # backward is two of the three matmul passes


@dataclass(frozen=True)
class StepEstimate:
    micro_batches: int
    matmul_s: float  # per step, all micro-batches
    memory_bound_s: float
    tensor_parallel: Transfer
    pipeline_p2p: Transfer
    pipeline_bubble_s: float
    data_parallel: Transfer  # all DP traffic of a step, hidden or not
    data_parallel_exposed_s: float
    optimizer_s: float
    step_s: float
    tokens_per_step: int
    world_size: int
    model_flops_per_token: float
    hardware_flops_per_token: float
    megatron_flops_per_token: float
    peak_flops_per_device: float

    @property
    def compute_s(self) -> float:
        return self.matmul_s + self.memory_bound_s

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_per_step / self.step_s

    @property
    def tokens_per_s_per_device(self) -> float:
        return self.tokens_per_s / self.world_size

    @property
    def mfu(self) -> float:
        return self.tokens_per_s_per_device * self.model_flops_per_token / self.peak_flops_per_device

    @property
    def hfu(self) -> float:
        return self.tokens_per_s_per_device * self.hardware_flops_per_token / self.peak_flops_per_device

    @property
    def megatron_tflops_per_device(self) -> float:
        """Achieved TFLOP/s per device counted with seed 003's F (full recomputation), as its table does."""
        return self.tokens_per_s_per_device * self.megatron_flops_per_token / 1e12


def _data_parallel_group(job: Job) -> Group:
    per_node = job.devices_per_node_in_dp_group
    return Group(job.data_parallel, per_node, job.hardware.devices_per_node // per_node)


def _data_parallel_traffic(job: Job, efficiency: Efficiency) -> tuple[Transfer, Transfer]:
    """(traffic repeated every micro-batch, traffic once per step)."""
    hw, software = job.hardware, job.software
    params = count_parameters(job.model).total / (job.tensor_parallel * job.pipeline_parallel)
    weight_bytes, grad_bytes = BF16 * params, software.grad_reduce_bytes * params
    group = _data_parallel_group(job)
    if software.sharding == "fsdp":
        gather = collective("all_gather", weight_bytes, group, hw, efficiency)
        reduce = collective("reduce_scatter", grad_bytes, group, hw, efficiency)
        return gather.times(2) + reduce, Transfer()
    if software.sharding == "hsdp":
        shard = job.state_shard_size
        shard_group = Group(shard, shard, hw.devices_per_node // shard)
        gather = collective("all_gather", weight_bytes, shard_group, hw, efficiency)
        reduce = collective("reduce_scatter", grad_bytes, shard_group, hw, efficiency)
        replicas = job.data_parallel // shard
        replica_group = Group(replicas, 1, hw.devices_per_node)
        across = collective("all_reduce", grad_bytes / shard, replica_group, hw, efficiency)
        return gather.times(2) + reduce, across
    if software.sharding == "ddp":
        return Transfer(), collective("all_reduce", grad_bytes, group, hw, efficiency)
    reduce = collective("reduce_scatter", grad_bytes, group, hw, efficiency)
    return Transfer(), reduce + collective("all_gather", weight_bytes, group, hw, efficiency)


def estimate_step(job: Job, efficiency: Efficiency = CALIBRATED) -> StepEstimate:
    args, hw, software = job.model, job.hardware, job.software
    tp, pp, seq = job.tensor_parallel, job.pipeline_parallel, job.seq_len
    recomputed = job.recomputed_fraction
    tokens_mb = job.micro_batch * seq
    layers = args.n_layers / pp

    flops_hw = hardware_flops_per_token(args, seq, recomputed)
    peak = hw.peak_flops_per_device
    die = hw.accelerator.compute_die
    # The output head runs on the last pipeline stage only, so with PP that stage is the slowest and sets the pace.
    head = 6.0 * args.dim * args.vocab_size
    stage_flops = (flops_hw - head) / pp + head
    matmul_mb = stage_flops * tokens_mb / tp / (peak * efficiency.matmul_fraction[die])

    # Elementwise forward traffic (a third of forward + backward) runs again for recomputed blocks; per-op
    # selective recomputes exactly those ops in every block.
    elementwise_rerun = 1.0 if job.checkpointing == "selective" else recomputed
    elementwise = efficiency.elementwise_bytes_per_hidden * args.dim * (1 + elementwise_rerun / 3)
    scores = 0.0
    if software.attention == "materialized":
        per_score = MATERIALIZED_SCORE_BYTES_FORWARD * (1 + recomputed) + MATERIALIZED_SCORE_BYTES_BACKWARD
        scores = args.n_heads * seq * per_score
    per_token = layers * (elementwise + scores) + args.vocab_size * LOGIT_BYTES_PER_ELEMENT
    memory_mb = per_token * tokens_mb / tp / hw.hbm_bytes_per_s_per_device

    tp_mb = Transfer()
    if tp > 1:
        activation_bytes = BF16 * tokens_mb * args.dim
        all_reduces = layers * (4 + 2 * recomputed)  # forward 2, backward 2, recomputed forward 2
        tp_mb = collective("all_reduce", activation_bytes, Group(tp, tp), hw, efficiency).times(all_reduces)
    p2p_mb = Transfer()
    if pp > 1:
        send = BF16 * tokens_mb * args.dim / tp  # scatter/gather: each TP rank sends its slice
        p2p_mb = point_to_point(send, hw, efficiency, job.pipeline_crosses_nodes, hw.devices_per_node).times(2)

    m = job.micro_batches_per_step
    micro_batch_s = matmul_mb + memory_mb + tp_mb.seconds + p2p_mb.seconds
    bubble = (pp - 1) / software.pipeline_interleave * micro_batch_s if pp > 1 else 0.0
    pipeline_s = m * micro_batch_s + bubble

    per_mb, per_step = _data_parallel_traffic(job, efficiency)
    compute_mb = matmul_mb + memory_mb
    if software.dp_overlap:
        # Nothing hides the first all-gather and the last reduce of a micro-batch or step: one layer's worth.
        floor = per_mb.seconds / max(1.0, layers)
        exposed_mb = max(floor, per_mb.seconds - efficiency.overlap_fraction * compute_mb)
        window = efficiency.overlap_fraction * BACKWARD_SHARE * compute_mb
        exposed_step = max(per_step.seconds / max(1.0, layers), per_step.seconds - window)
    else:
        exposed_mb, exposed_step = per_mb.seconds, per_step.seconds
    dp_exposed = m * exposed_mb + exposed_step

    params = count_parameters(args).total / (tp * pp * job.optimizer_shard_size)
    optimizer_s = params * OPTIMIZER_BYTES_PER_PARAM / hw.hbm_bytes_per_s_per_device

    step_s = pipeline_s + dp_exposed + optimizer_s
    return StepEstimate(
        micro_batches=m,
        matmul_s=m * matmul_mb,
        memory_bound_s=m * memory_mb,
        tensor_parallel=tp_mb.times(m),
        pipeline_p2p=p2p_mb.times(m),
        pipeline_bubble_s=bubble,
        data_parallel=per_mb.times(m) + per_step,
        data_parallel_exposed_s=dp_exposed,
        optimizer_s=optimizer_s,
        step_s=step_s,
        tokens_per_step=job.tokens_per_step,
        world_size=job.world_size,
        model_flops_per_token=model_flops_per_token(args, seq),
        hardware_flops_per_token=flops_hw,
        megatron_flops_per_token=megatron_flops_per_token(args, seq, recompute=True),
        peak_flops_per_device=peak,
    )
