"""Step time from FLOPs, bytes and links. Pure arithmetic over a Job and the Efficiency parameters, which are rates of
the job's backend (fsdp, nemo, neuron: planner.job.Software.backend).

Per micro-batch and device:
  matmul time        = hardware FLOPs / (peak x matmul_fraction[backend.die]); with --precision fp8 the blocks'
                       linear layers run at the FP8 peak (same fraction of it), attention scores and the head at bf16
  memory-bound time  = (elementwise bytes of the backend's kernels + materialized attention bytes + logits bytes
                       + with fp8 on a PyTorch-native stack, torchao's amax and cast passes around each block linear) /
                       HBM bandwidth
  tensor-parallel    = activation all-reduces over NVLink/NeuronLink: on the critical path, or, where the stack
                       overlaps them with its GEMMs (tp_overlap), only what outlasts tp_overlap_fraction of the
                       linear layers' time
  pipeline           = stage sends; the 1F1B bubble adds (p - 1) / v micro-batch times per step; the last stage
                       also runs the output head, so it sets the pace
  context parallel   = K and V gathered around the CP ring (forward, again in backward with the reduce-scatter of
                       their gradients), hidden behind the attention it feeds; a device computes seq / CP tokens
Per step:
  data parallel      = FSDP/HSDP all-gathers (forward, backward) and reduce-scatter in the shard group per
                       micro-batch, plus HSDP's replica all-reduce once per step; or one gradient all-reduce (ddp),
                       or reduce-scatter + all-gather (zero1); gathers hide behind forward, the rest behind
                       backward, up to the backend's overlap_fraction of it, except the first gather and the last
                       reduce; once-per-step traffic also runs in a pipeline stage's idle time (the bubble)
  optimizer          = AdamW bytes per local parameter / HBM bandwidth
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

from planner.calibration import (
    CALIBRATED,
    DDP_BUCKET_BYTES,
    MATERIALIZED_SCORE_BYTES_BACKWARD,
    MATERIALIZED_SCORE_BYTES_FORWARD,
    MEGATRON_BUCKET_PARAMS,
    MEGATRON_BUCKET_PARAMS_PER_DP_RANK,
    OPTIMIZER_BYTES_PER_PARAM,
    TORCHAO_CAST_BYTES_PER_ELEMENT,
    TORCHAO_CASTS_PER_ELEMENT,
    Efficiency,
)
from planner.comms import Group, Transfer, collective, point_to_point
from planner.finetune import frozen_weight_gradient_flops_per_token, lora_parameters
from planner.flops import hardware_flops_per_token, megatron_flops_per_token, model_flops_per_token
from planner.job import Job
from planner.memory import BF16, LOGIT_BYTES_PER_ELEMENT
from slurm.backends import STACKS
from training.models.args import ModelArgs
from training.models.families import family_named
from training.models.params import count_parameters


@dataclass(frozen=True)
class StepEstimate:
    micro_batches: int
    matmul_s: float  # per step, all micro-batches
    memory_bound_s: float
    tensor_parallel: Transfer
    tensor_parallel_exposed_s: float  # what TP collectives add to the step (all of it unless the stack overlaps them)
    context_parallel: Transfer  # ring-attention K/V traffic of the step, hidden or not
    context_parallel_exposed_s: float
    pipeline_p2p: Transfer
    pipeline_bubble_s: float
    data_parallel: Transfer  # all DP traffic of a step, hidden or not
    # seconds by collective: shard_group (gathers + reduce-scatters, every micro-batch), replica_all_reduce (hsdp),
    # gradient_all_reduce (ddp), optimizer_shards (zero1)
    data_parallel_breakdown: dict[str, float]
    data_parallel_exposed_s: float
    optimizer_s: float
    step_s: float
    tokens_per_step: int
    world_size: int
    model_flops_per_token: float
    hardware_flops_per_token: float
    megatron_flops_per_token: float
    peak_flops_per_device: float  # dense bf16: MFU and HFU are against it in either precision
    precision: str = "bf16"

    @property
    def model_tflops_per_device(self) -> float:
        """Achieved model TFLOP/s per device (6N + 12 l h s per token), as NVIDIA's performance tables print it."""
        return self.tokens_per_s_per_device * self.model_flops_per_token / 1e12

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
        """Achieved TFLOP/s per device counted with the Megatron-LM paper's F (full recomputation), as its table does."""
        return self.tokens_per_s_per_device * self.megatron_flops_per_token / 1e12


@dataclass(frozen=True)
class DataParallelTraffic:
    """A step's data-parallel collectives, split by when they run and what they can hide behind."""

    gather: Transfer  # one all-gather of the weights in the shard group (forward; backward gathers again)
    reduce: Transfer  # one reduce-scatter of the gradients in the shard group
    # once per step after the last backward: HSDP's replica all-reduce, DDP's all-reduce, ZeRO-1's reduce-scatter,
    # a pipelined FSDP stage's reduce-scatter
    per_step: Transfer
    per_step_kind: str  # key of per_step (+ per_step_gather) in StepEstimate.data_parallel_breakdown
    per_step_buckets: int  # the last bucket (one block, or one DDP bucket) cannot hide
    # once per step before the first forward: ZeRO-1's parameter all-gather (Megatron's overlap_param_gather runs
    # it behind the forward), a pipelined FSDP stage's all-gather
    per_step_gather: Transfer = field(default_factory=Transfer)

    @property
    def per_micro_batch(self) -> Transfer:
        return self.gather.times(2) + self.reduce

    @property
    def once_per_step(self) -> Transfer:
        return self.per_step + self.per_step_gather


def _buckets(total_bytes: float, job: Job) -> int:
    """Gradient buckets of a DDP / ZeRO-1 step. Megatron Core sizes them by the DP group, max(40M, 1M x DP)
    parameters (DistributedDataParallelConfig.bucket_size), so collectives over many nodes stay bandwidth-bound;
    torch DDP's are 25 MB."""
    if STACKS[job.software.backend].megatron_core:
        params = total_bytes / job.software.grad_reduce_bytes
        return max(
            1,
            math.ceil(
                params / max(MEGATRON_BUCKET_PARAMS, MEGATRON_BUCKET_PARAMS_PER_DP_RANK * job.gradient_group_size)
            ),
        )
    return max(1, math.ceil(total_bytes / DDP_BUCKET_BYTES))


def _data_parallel_traffic(job: Job, efficiency: Efficiency) -> DataParallelTraffic:
    """Collectives as FSDP2 / DDP / ZeRO-1 run them. FSDP units are transformer blocks: each gathers its weights
    before its forward and again before its backward, and reduce-scatters its gradients after its backward."""
    hw, software = job.hardware, job.software
    params = count_parameters(job.model).total / (job.tensor_parallel * job.pipeline_parallel)
    weight_bytes, grad_bytes = BF16 * params, software.grad_reduce_bytes * params
    blocks = max(1, math.ceil(job.model.n_layers / job.pipeline_parallel))
    per_node = job.devices_per_node_in_dp_group  # DP ranks of one DP group on a node
    if software.sharding in ("fsdp", "hsdp"):
        shard = job.state_shard_size
        shard_per_node = min(shard, per_node)
        shard_group = Group(shard, shard_per_node, hw.devices_per_node // shard_per_node)
        gather = collective("all_gather", weight_bytes, shard_group, hw, efficiency, buckets=blocks)
        reduce = collective("reduce_scatter", grad_bytes, shard_group, hw, efficiency, buckets=blocks)
        if job.pipeline_parallel > 1:
            # PyTorch's pipelining keeps a stage's FSDP weights gathered across micro-batches and reduce-scatters
            # its gradients after the last one (no resharding in between): once per step, not per micro-batch.
            once = reduce
            if job.replicas > 1:
                replica_per_node = max(1, per_node // shard)
                replica_group = Group(job.replicas, replica_per_node, hw.devices_per_node // replica_per_node)
                once = once + collective("all_reduce", grad_bytes / shard, replica_group, hw, efficiency)
            return DataParallelTraffic(Transfer(), Transfer(), once, "shard_group", blocks, gather)
        across = Transfer()
        if job.replicas > 1:
            # Each shard index all-reduces its own gradient shard with the same index in the other replicas;
            # shards are the inner mesh dimension, so a replica group has per_node // shard members on a node.
            replica_per_node = max(1, per_node // shard)
            replica_group = Group(job.replicas, replica_per_node, hw.devices_per_node // replica_per_node)
            across = collective("all_reduce", grad_bytes / shard, replica_group, hw, efficiency, buckets=blocks)
        return DataParallelTraffic(gather, reduce, across, "replica_all_reduce", blocks)
    group = Group(job.gradient_group_size, per_node, hw.devices_per_node // per_node)
    buckets = _buckets(grad_bytes, job)
    if software.sharding == "ddp":
        all_reduce = collective("all_reduce", grad_bytes, group, hw, efficiency, buckets=buckets)
        return DataParallelTraffic(Transfer(), Transfer(), all_reduce, "gradient_all_reduce", buckets)
    reduce = collective("reduce_scatter", grad_bytes, group, hw, efficiency, buckets=buckets)
    gather = collective("all_gather", weight_bytes, group, hw, efficiency, buckets=buckets)
    return DataParallelTraffic(Transfer(), Transfer(), reduce, "optimizer_shards", buckets, gather)


def _exposed_data_parallel(
    traffic: DataParallelTraffic,
    forward_s: float,
    backward_s: float,
    micro_batches: int,
    blocks: int,
    overlap: float,
    idle_s: float = 0.0,
) -> float:
    """Seconds of data-parallel traffic nothing hides, per step.

    Forward: each block's all-gather is prefetched behind the previous block's forward, except the first block's.
    Backward: the next block's all-gather and the previous block's reduce-scatter run behind a block's backward,
    except the last reduce-scatter. The once-per-step traffic runs behind the last micro-batch's backward (HSDP's
    replica all-reduce follows each block's reduce-scatter; DDP's buckets fill as gradients are made), except its
    last bucket; where the shard group's traffic uses the network too, it takes that share of the window first.
    The once-per-step gather (ZeRO-1's parameters, a pipelined FSDP stage's weights) runs behind the first
    micro-batch's forward, bucket by bucket, except the first bucket.
    Nothing hides behind more than `overlap` of the compute it runs beside. A pipeline stage idles for the bubble's
    length (`idle_s`), half in its warm-up and half in its cool-down: that time hides once-per-step traffic whole.
    """
    gather, reduce, per_step = traffic.gather.seconds, traffic.reduce.seconds, traffic.per_step.seconds
    exposed_forward = max(gather / blocks, gather - overlap * forward_s)
    exposed_backward = max(reduce / blocks, gather + reduce - overlap * backward_s)
    window = overlap * backward_s + idle_s / 2
    if traffic.gather.network_bytes_per_node or traffic.reduce.network_bytes_per_node:
        window = max(0.0, window - gather - reduce)
    exposed_step = max(per_step / traffic.per_step_buckets, per_step - window) if per_step else 0.0
    first = traffic.per_step_gather.seconds
    if first:
        exposed_step += max(first / traffic.per_step_buckets, first - overlap * forward_s - idle_s / 2)
    return micro_batches * (exposed_forward + exposed_backward) + exposed_step


@functools.lru_cache(maxsize=4096)  # pure in the job; the fit evaluates each published job thousands of times
def matmul_flops_by_rate(job: Job) -> tuple[float, float]:
    """(block linear-layer FLOPs, other matmul FLOPs) per token on the slowest pipeline stage, recomputation
    included. The first run at the FP8 rate under --precision fp8; the other (attention scores and values, the output
    head) stay bf16, as TransformerEngine and torchao's float8 leave them."""
    args, pp = job.model, job.pipeline_parallel
    recomputed = job.recomputed_fraction
    total = hardware_flops_per_token(args, job.seq_len, recomputed)
    # A token multiplies by the experts it is routed to only (active_per_layer == per_layer for dense blocks).
    linear = args.n_layers * count_parameters(args).active_per_layer * (6.0 + 2.0 * recomputed)
    head = 6.0 * args.dim * args.vocab_size
    other = total - linear - head
    if job.lora_rank is not None:  # frozen base: no weight gradients; the adapters train (planner/finetune.py)
        per_layer = count_parameters(args).per_layer
        linear -= frozen_weight_gradient_flops_per_token(args, per_layer) - 2.0 * args.dim * args.vocab_size
        linear += lora_parameters(args, job.lora_rank, job.lora_target_modules) * (6.0 + 2.0 * recomputed)
        head = 4.0 * args.dim * args.vocab_size
    # The output head runs on the last pipeline stage only, so with PP that stage is the slowest and sets the pace.
    return linear / pp, other / pp + head


def block_linear_features(args: ModelArgs) -> tuple[tuple[int, int], ...]:
    """(in_features, out_features) of each linear layer of one block: the family's LoRA targets list them all; a
    family without (GPT-NeoX) has the GPT block's fused QKV, attention output and two MLP projections."""
    targets = family_named(args.flavor).lora_targets
    if targets:
        return tuple(target.features(args) for target in targets)
    dim, ffn = args.dim, args.ffn_dim
    return (dim, 3 * dim), (dim, dim), (dim, ffn), (ffn, dim)


def torchao_float8_cast_bytes(job: Job) -> float:
    """HBM bytes per micro-batch and device of torchao's float8 casts (calibration.TORCHAO_CAST_BYTES_PER_ELEMENT):
    each element of a block linear's input, output gradient and weight is cast once forward and once backward. The
    forward casts run again where checkpointing recomputes the forward. Weights are counted whole on each device, an
    upper bound under FSDP's FP8 all-gather (each rank casts its shard before the gather): at 16K tokens a
    micro-batch they are 8 % (1B) to 16 % (8B, recomputed) of the bytes. Zero unless the job trains FP8 through
    torchao (a PyTorch-native stack): TransformerEngine fuses its casts into the neighbouring kernels."""
    software = job.software
    if software.precision != "fp8" or STACKS[software.backend].megatron_core:
        return 0.0
    features = block_linear_features(job.model)
    activations = sum(n_in + n_out for n_in, n_out in features)  # elements per token: inputs and output gradients
    weights = sum(n_in * n_out for n_in, n_out in features)
    rerun = 1.0 if job.checkpointing == "selective" else job.recomputed_fraction
    tokens = job.tokens_per_micro_batch_per_device
    # input and weight: forward (again if recomputed) and backward; output gradient: twice in backward
    inputs = sum(n_in for n_in, _ in features)
    per_step = TORCHAO_CASTS_PER_ELEMENT
    casts = tokens * (per_step * activations + rerun * inputs) + weights * (per_step + rerun)
    layers = job.model.n_layers / job.pipeline_parallel
    return TORCHAO_CAST_BYTES_PER_ELEMENT * casts * layers / job.tensor_parallel


def _context_parallel(job: Job, efficiency: Efficiency) -> Transfer:
    """Ring attention's K/V traffic per micro-batch: each layer gathers the whole sequence's K and V around the CP
    ring in forward (and again for recomputed blocks), and in backward gathers them again and reduce-scatters
    their gradients. KV heads are split over TP."""
    cp = job.context_parallel
    if cp == 1:
        return Transfer()
    args, hw = job.model, job.hardware
    kv_bytes = BF16 * 2 * args.kv_heads * args.head_dim * job.micro_batch * job.seq_len / job.tensor_parallel
    per_node = job.context_parallel_per_node
    group = Group(cp, per_node, hw.devices_per_node // per_node)
    gather = collective("all_gather", kv_bytes, group, hw, efficiency)
    reduce = collective("reduce_scatter", kv_bytes, group, hw, efficiency)
    layers = job.model.n_layers / job.pipeline_parallel
    return (gather.times(2 + job.recomputed_fraction) + reduce).times(layers)


def estimate_step(job: Job, efficiency: Efficiency = CALIBRATED) -> StepEstimate:
    args, hw, software = job.model, job.hardware, job.software
    tp, pp, seq = job.tensor_parallel, job.pipeline_parallel, job.seq_len
    recomputed = job.recomputed_fraction
    tokens_mb = job.tokens_per_micro_batch_per_device
    layers = args.n_layers / pp

    flops_hw = hardware_flops_per_token(args, seq, recomputed)
    peak = hw.peak_flops_per_device
    die = hw.accelerator.compute_die
    fraction = efficiency.matmul(software.backend, die)
    linear_flops, other_flops = matmul_flops_by_rate(job)
    # FP8 GEMMs are assumed to reach the same fraction of the FP8 peak as bf16 GEMMs of the bf16 peak.
    linear_peak = hw.peak_flops_per_device
    if software.precision == "fp8" and hw.peak_fp8_flops_per_device is not None:
        linear_peak = hw.peak_fp8_flops_per_device
    linear_mb = linear_flops * tokens_mb / tp / (linear_peak * fraction)
    other_mb = other_flops * tokens_mb / tp / (peak * fraction)
    matmul_mb = linear_mb + other_mb

    # Elementwise forward traffic (a third of forward + backward) runs again for recomputed blocks; per-op
    # selective recomputes exactly those ops in every block.
    elementwise_rerun = 1.0 if job.checkpointing == "selective" else recomputed
    elementwise = efficiency.elementwise_bytes_per_hidden[software.kernels] * args.dim * (1 + elementwise_rerun / 3)
    scores = 0.0
    if software.attention == "materialized":
        per_score = MATERIALIZED_SCORE_BYTES_FORWARD * (1 + recomputed) + MATERIALIZED_SCORE_BYTES_BACKWARD
        scores = args.n_heads * seq * per_score
    per_token = layers * (elementwise + scores) + args.vocab_size * LOGIT_BYTES_PER_ELEMENT
    # torchao's casts are separate kernels with nothing to hide behind: the GEMM waits on its FP8 operands.
    memory_mb = (per_token * tokens_mb / tp + torchao_float8_cast_bytes(job)) / hw.hbm_bytes_per_s_per_device

    tp_mb = Transfer()
    if tp > 1:
        activation_bytes = BF16 * tokens_mb * args.dim
        all_reduces = layers * (4 + 2 * recomputed)  # forward 2, backward 2, recomputed forward 2
        tp_mb = collective("all_reduce", activation_bytes, Group(tp, tp), hw, efficiency).times(all_reduces)
    tp_exposed_mb = tp_mb.seconds
    if software.tp_overlap:
        # Each TP collective is split into chunks pipelined with the GEMM it feeds (TE's userbuffers, AsyncTP):
        # only what outlasts that share of the linear layers' time shows; the first chunk never hides.
        tp_exposed_mb = max(
            tp_mb.seconds / max(1.0, 2 * layers), tp_mb.seconds - efficiency.tp_overlap_fraction * linear_mb
        )
    p2p_mb = Transfer()
    if pp > 1:
        send = BF16 * tokens_mb * args.dim / tp  # scatter/gather: each TP rank sends its slice
        p2p_mb = point_to_point(send, hw, efficiency, job.pipeline_crosses_nodes, hw.devices_per_node).times(2)

    cp_mb = _context_parallel(job, efficiency)
    # The ring's next K/V block arrives while attention runs on the current one: only what outlasts it shows.
    attention_mb = (other_flops - 6.0 * args.dim * args.vocab_size) * tokens_mb / tp / (peak * fraction)
    cp_exposed_mb = max(0.0, cp_mb.seconds - attention_mb)

    m = job.micro_batches_per_step
    micro_batch_s = matmul_mb + memory_mb + tp_exposed_mb + p2p_mb.seconds + cp_exposed_mb
    bubble = (pp - 1) / software.pipeline_interleave * micro_batch_s if pp > 1 else 0.0
    pipeline_s = m * micro_batch_s + bubble

    traffic = _data_parallel_traffic(job, efficiency)
    per_mb = traffic.per_micro_batch
    compute_mb = matmul_mb + memory_mb
    # Forward is a third of the model FLOPs; backward the rest plus whatever checkpointing recomputes.
    forward_mb = compute_mb * model_flops_per_token(args, seq) / 3 / flops_hw
    if software.dp_overlap:
        blocks = max(1, math.ceil(args.n_layers / pp))
        overlap = efficiency.overlap(software.backend)
        # With a pipeline each stage idles for the bubble's length (in its warm-up or its cool-down): the stage's
        # once-per-step gathers and reduce-scatters of chunks not in use run then, as Megatron's overlapped
        # distributed optimizer and PyTorch's pipelined FSDP issue them per chunk.
        idle = bubble if pp > 1 else 0.0
        dp_exposed = _exposed_data_parallel(traffic, forward_mb, compute_mb - forward_mb, m, blocks, overlap, idle)
    else:
        dp_exposed = m * per_mb.seconds + traffic.once_per_step.seconds
    breakdown = {"shard_group": m * per_mb.seconds, "replica_all_reduce": 0.0}
    breakdown |= {"gradient_all_reduce": 0.0, "optimizer_shards": 0.0}
    breakdown[traffic.per_step_kind] += traffic.once_per_step.seconds

    if job.lora_rank is None:
        trained = count_parameters(args).total
    else:
        trained = lora_parameters(args, job.lora_rank, job.lora_target_modules)
    params = trained / (tp * pp * job.optimizer_shard_size)
    optimizer_s = params * OPTIMIZER_BYTES_PER_PARAM / hw.hbm_bytes_per_s_per_device

    step_s = pipeline_s + dp_exposed + optimizer_s
    return StepEstimate(
        micro_batches=m,
        matmul_s=m * matmul_mb,
        memory_bound_s=m * memory_mb,
        tensor_parallel=tp_mb.times(m),
        tensor_parallel_exposed_s=m * tp_exposed_mb,
        context_parallel=cp_mb.times(m),
        context_parallel_exposed_s=m * cp_exposed_mb,
        pipeline_p2p=p2p_mb.times(m),
        pipeline_bubble_s=bubble,
        data_parallel=per_mb.times(m) + traffic.once_per_step,
        data_parallel_breakdown=breakdown,
        data_parallel_exposed_s=dp_exposed,
        optimizer_s=optimizer_s,
        step_s=step_s,
        tokens_per_step=job.tokens_per_step,
        world_size=job.world_size,
        model_flops_per_token=model_flops_per_token(args, seq),
        hardware_flops_per_token=flops_hw,
        megatron_flops_per_token=megatron_flops_per_token(args, seq, recompute=True),
        peak_flops_per_device=peak,
        precision=software.precision,
    )
