"""Memory per device (GPU or NeuronCore) for mixed-precision AdamW training. Pure arithmetic: no torch.

Training state is 16 bytes per parameter (2 bf16 weights, 2 bf16 gradients, 12 fp32 master weights, momentum and
variance), divided by tensor x pipeline parallel and then sharded as the DP mode says (fsdp: all 16 bytes over
every DP rank; hsdp: over its shard group only, by default the DP ranks of one node, every replica holding a full
copy; zero1: the 12 optimizer bytes only; ddp: nothing).
Activations are counted per saved tensor of one transformer block (bf16), times tokens in flight, divided by TP
(sequence parallel assumed). A runtime reserve and a fragmentation fraction cover the allocator, CUDA or Neuron
runtime and collective buffers.

`fits(...)` is what the job submitter calls to refuse a job that cannot fit before it queues.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.calibration import FRAGMENTATION_FRACTION, RUNTIME_RESERVED_GIB
from planner.finetune import lora_parameters
from planner.flops import Checkpointing
from planner.hardware import Hardware, hardware
from planner.job import Job, Sharding, Software
from training.models.args import ModelArgs
from training.models.families import family_named
from training.models.params import count_parameters

GIB = float(1 << 30)
BF16 = 2
FP32 = 4
NORM_STATS_BYTES = 8
FP8_COPIES = 2  # bytes per weight element for the FP8 copy and its transpose
LOGIT_BYTES_PER_ELEMENT = 2 + 4 + 4  # bf16 logits, their fp32 copy for the loss, the fp32 gradient
# training/models/loss.py's CHUNK_TOKENS (a test keeps the two equal; this module imports no torch).
LOSS_CHUNK_TOKENS = 4096


def loss_bytes(
    tokens: int,
    vocab: int,
    dim: int,
    fused: bool = True,
    chunk_tokens: int = LOSS_CHUNK_TOKENS,
    matmul_bytes: int = BF16,
) -> float:
    """Peak bytes the loss holds beyond the hidden states and the head weight, for one micro-batch of `tokens`.

    Unfused (the published frameworks): the [tokens, vocab] logits, their fp32 copy and its gradient live from the
    forward pass to backward. Fused (this trainer's training/models/loss.py): one chunk at a time, the peak being
    either while a chunk's log-softmax is formed (its logits in the matmul dtype, their fp32 copy and one fp32
    temporary of logsumexp, beside the fp32 sum of the head's weight gradient) or while its gradients are formed
    (the fp32 softmax gradient and its matmul-dtype copy, beside the weight gradient's sum and the chunk's part);
    the hidden states' gradient (matmul dtype), kept for backward, throughout.
    """
    if not fused:
        return tokens * vocab * LOGIT_BYTES_PER_ELEMENT
    chunk = min(tokens, chunk_tokens)
    weight_sum = FP32 * vocab * dim if tokens > chunk else 0
    logits_phase = chunk * vocab * (matmul_bytes + FP32 + FP32) + weight_sum
    gradient_phase = chunk * vocab * (FP32 + matmul_bytes) + vocab * dim * (FP32 + matmul_bytes)
    return max(logits_phase, gradient_phase) + matmul_bytes * tokens * dim


def block_activation_bytes_per_token(args: ModelArgs, mode: str, attention: str = "flash", seq_len: int = 0) -> float:
    """Bytes one block keeps for backward, per token, under a checkpointing mode ("none", "selective", "full")."""
    if mode == "full":
        return BF16 * args.dim  # the block input only; the rest is recomputed
    saving = "selective" if mode == "selective" else "none"  # any other mode saves what "none" does per block
    saved = BF16 * family_named(args.flavor).saved_activation_elements[saving](args)
    if saving == "selective":
        return saved
    saved += NORM_STATS_BYTES  # the two norms' fp32 per-token statistics
    if attention == "materialized":
        saved += 5 * args.n_heads * seq_len  # softmax out (2), dropout mask (1), dropout out (2) per score
    else:  # fused kernels (cuDNN, flash) keep a fp32 log-sum-exp per head and token instead of the scores
        saved += FP32 * args.n_heads
    return saved


@dataclass(frozen=True)
class MemoryEstimate:
    weights_gib: float
    gradients_gib: float
    optimizer_gib: float
    activations_gib: float
    logits_gib: float
    gathered_params_gib: float  # FSDP: unsharded bf16 blocks in flight (current + prefetched) and their gradients
    runtime_gib: float  # allocator fragmentation, CUDA/Neuron runtime, collective buffers
    capacity_gib: float

    @property
    def total_gib(self) -> float:
        return sum(self.breakdown().values())

    @property
    def fits(self) -> bool:
        return self.total_gib <= self.capacity_gib

    def breakdown(self) -> dict[str, float]:
        return {
            "weights": self.weights_gib,
            "gradients": self.gradients_gib,
            "optimizer": self.optimizer_gib,
            "activations": self.activations_gib,
            "logits": self.logits_gib,
            "gathered_params": self.gathered_params_gib,
            "runtime": self.runtime_gib,
        }


def job_memory(job: Job) -> MemoryEstimate:
    args = job.model
    counts = count_parameters(args)
    model_parallel = job.tensor_parallel * job.pipeline_parallel
    params = counts.total / model_parallel
    shard, optimizer_shard = job.state_shard_size, job.optimizer_shard_size
    weights = BF16 * params / shard
    gradients = BF16 * params / shard
    optimizer = 12 * params / optimizer_shard
    # LoRA: the frozen base keeps its bf16 weights only; the adapters train with the full state (planner/finetune).
    lora = job.lora_rank
    adapters = 0.0 if lora is None else lora_parameters(args, lora, job.lora_target_modules) / model_parallel
    if job.lora_rank is not None:
        weights = BF16 * (params + adapters) / shard
        gradients = BF16 * adapters / shard
        optimizer = 12 * adapters / optimizer_shard
    # Gradients of a gathered block go back through the wire dtype; a frozen block has none.
    reduce_bytes = job.software.grad_reduce_bytes if job.lora_rank is None else 0

    gathered = 0.0
    block = counts.per_layer / job.tensor_parallel
    if job.software.sharding in ("fsdp", "hsdp") and shard > 1:
        gathered = block * (2 * BF16 + reduce_bytes)
        if job.pipeline_parallel > 1:  # the stage stays gathered across micro-batches (see step_time)
            gathered = params * (BF16 + reduce_bytes)
    if job.software.precision == "fp8":
        # FP8 GEMMs read an e4m3 copy of each weight and, on Hopper, of its transpose (TransformerEngine caches
        # both): 2 bytes per block parameter, for the gathered blocks under FSDP, for every local block otherwise.
        # Master weights, gradients and optimizer states stay as in bf16; activations are counted as in bf16 (the
        # FP8 copies of the linear layers' inputs replace nothing the bf16 count holds: an upper bound).
        if job.software.sharding in ("fsdp", "hsdp") and shard > 1:
            gathered += 2 * FP8_COPIES * block
        else:
            weights += FP8_COPIES * block * args.n_layers / job.pipeline_parallel

    tokens = job.tokens_per_micro_batch_per_device
    in_flight = min(job.pipeline_parallel, job.micro_batches_per_step)
    layers = args.n_layers / job.pipeline_parallel
    attention = job.software.attention
    if job.checkpointing == "every_n":
        fraction = job.recomputed_fraction
        per_token_layer = fraction * block_activation_bytes_per_token(args, "full") + (
            1 - fraction
        ) * block_activation_bytes_per_token(args, "none", attention, job.seq_len)
    else:
        per_token_layer = block_activation_bytes_per_token(args, job.checkpointing, attention, job.seq_len)
    if job.lora_rank is not None:  # each adapter's rank-r intermediate
        per_token_layer += BF16 * len(job.lora_target_modules) * job.lora_rank
    activations = layers * in_flight * tokens * per_token_layer / job.tensor_parallel
    if job.checkpointing in ("full", "every_n"):  # one block recomputed at a time holds its full activations
        recomputed = block_activation_bytes_per_token(args, "none", attention, job.seq_len)
        activations += tokens * recomputed / job.tensor_parallel
    logits = loss_bytes(tokens, args.vocab_size, args.dim, fused=job.software.loss == "fused") / job.tensor_parallel

    counted = (weights + gradients + optimizer + activations + logits + gathered) / GIB
    runtime = RUNTIME_RESERVED_GIB + FRAGMENTATION_FRACTION * counted
    return MemoryEstimate(
        weights_gib=weights / GIB,
        gradients_gib=gradients / GIB,
        optimizer_gib=optimizer / GIB,
        activations_gib=activations / GIB,
        logits_gib=logits / GIB,
        gathered_params_gib=gathered / GIB,
        runtime_gib=runtime,
        capacity_gib=job.hardware.memory_gib_per_device,
    )


def _job(
    model_args: ModelArgs,
    instance: str | Hardware,
    nodes: int,
    seq_len: int,
    micro_batch: int,
    activation_checkpointing: Checkpointing,
    every_n: int,
    tensor_parallel: int,
    pipeline_parallel: int,
    sharding: Sharding,
    global_batch: int | None,
    shard_group: int | None = None,
) -> Job:
    node = instance if isinstance(instance, Hardware) else hardware(instance)
    return Job(
        model=model_args,
        hardware=node,
        nodes=nodes,
        seq_len=seq_len,
        micro_batch=micro_batch,
        checkpointing=activation_checkpointing,
        every_n=every_n,
        tensor_parallel=tensor_parallel,
        pipeline_parallel=pipeline_parallel,
        global_batch=global_batch,
        software=Software(sharding=sharding),
        shard_group=shard_group,
    )


def memory_per_device(
    model_args: ModelArgs,
    instance: str | Hardware,
    nodes: int,
    seq_len: int,
    micro_batch: int,
    activation_checkpointing: Checkpointing = "none",
    *,
    every_n: int = 2,
    tensor_parallel: int = 1,
    pipeline_parallel: int = 1,
    sharding: Sharding = "fsdp",
    global_batch: int | None = None,
    shard_group: int | None = None,
) -> MemoryEstimate:
    """Peak memory per device. Raises PlanError (one line: argument and value) or HardwareError on bad input."""
    return job_memory(
        _job(
            model_args,
            instance,
            nodes,
            seq_len,
            micro_batch,
            activation_checkpointing,
            every_n,
            tensor_parallel,
            pipeline_parallel,
            sharding,
            global_batch,
            shard_group,
        )
    )


def fits_message(job: Job, estimate: MemoryEstimate) -> str:
    parts = ", ".join(f"{name} {gib:.1f}" for name, gib in estimate.breakdown().items() if gib >= 0.05)
    where = f"{job.hardware.label} has {estimate.capacity_gib:.1f} GiB per device"
    if estimate.fits:
        return f"fits: {estimate.total_gib:.1f} GiB per device, {where} ({parts} GiB)"
    hints = []
    if job.checkpointing != "full":
        hints.append("activation checkpointing 'full'")
    if job.micro_batch > 1:
        hints.append("a smaller micro-batch")
    if job.software.sharding == "fsdp":
        hints.append("more nodes")
    elif job.software.sharding == "hsdp":
        hints.append("a larger HSDP shard group or sharding 'fsdp'")
    else:
        hints.append("sharding 'fsdp'")
    return (
        f"does not fit: needs {estimate.total_gib:.1f} GiB per device, {where} ({parts} GiB) at micro-batch "
        f"{job.micro_batch}, seq {job.seq_len}, checkpointing {job.checkpointing!r}; try {' or '.join(hints)}"
    )


def fits(job: Job) -> tuple[bool, str]:
    """(True, "fits: ...") or (False, "does not fit: needs X GiB per device ..."), one line either way."""
    estimate = job_memory(job)
    return estimate.fits, fits_message(job, estimate)
