"""A training job as the planner sees it: model, nodes, batch, parallel layout and the framework's habits.

Layout: tensor parallel (TP) inside a node, pipeline parallel (PP) across nodes, data parallel (DP) over the rest.
DP is one of: fsdp (params, grads and optimizer sharded over every DP rank), hsdp (sharded over a shard group, by
default the DP ranks of one node, and replicated across groups: FSDP2's 2-D mesh, dp_replicate x dp_shard), ddp
(everything replicated, gradients all-reduced) or zero1 (optimizer states sharded, weights and gradients
replicated: Megatron's distributed optimizer, Neuron NeMo).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from planner.flops import CHECKPOINTING_MODES, Checkpointing, recomputed_block_fraction
from planner.hardware import Hardware
from slurm.backends import BACKENDS, STACKS, Stack, backend_named
from spec.errors import UserError
from training.finetune.config import LORA_TARGETS
from training.models.args import ModelArgs
from training.models.families import family_named

Sharding = Literal["fsdp", "hsdp", "ddp", "zero1"]
SHARDINGS: tuple[str, ...] = ("fsdp", "hsdp", "ddp", "zero1")
Attention = Literal["flash", "materialized"]
ATTENTIONS: tuple[str, ...] = ("flash", "materialized")
Loss = Literal["fused", "materialized"]
LOSSES: tuple[str, ...] = ("fused", "materialized")
Precision = Literal["bf16", "fp8"]
PRECISIONS: tuple[str, ...] = ("bf16", "fp8")
# The software stack whose fitted efficiency times a job (slurm.backends.STACKS): fsdp (PyTorch-native: this repo's
# FSDP2 trainer, torchtitan, FSDP1 stacks, DDP), nemo (Megatron Core with TransformerEngine, through Megatron Bridge
# or NeMo 2; the Megatron-LM papers' code), neuron (Neuron NeMo / NxDT on Trainium).
STACK_NAMES: tuple[str, ...] = tuple(STACKS)
# A training backend as slurm.backends.BACKENDS names it (fsdp, nemo2, bridge, neuron) or as --backend does (nemo:
# the default container framework's): it picks the stack and that backend's own software defaults.
Backend = str
# Which elementwise kernels a step runs (calibration.Efficiency.elementwise_bytes_per_hidden's keys): PyTorch eager,
# torch.compile's fused (inductor) kernels, Megatron Core/TransformerEngine's hand-fused ones. The Neuron compiler's
# traffic cannot be told apart from Trainium's matmul fraction on the one Trainium source: it is taken as eager's.
Kernels = Literal["eager", "compiled", "fused"]


class PlanError(UserError):
    """A job the planner cannot model. str() is one line: the argument, its value, what is wrong."""

    def __init__(self, argument: str, value: Any, message: str) -> None:
        self.argument, self.value, self.reason = argument, value, message
        super().__init__(f"{argument}: {value!r} {message}")


@dataclass(frozen=True)
class Software:
    """What the framework does that changes time or memory. Defaults describe this repo's trainer: FSDP2 over
    every rank, SDPA flash attention, gradients reduced in fp32, collectives overlapped with compute."""

    sharding: Sharding = "fsdp"
    attention: Attention = "flash"  # materialized: the s x s scores go through HBM (unfused softmax, dropout)
    grad_reduce_bytes: int = 4  # bytes per gradient element on the wire (4 fp32, 2 bf16)
    dp_overlap: bool = True  # DP collectives run behind compute (FSDP prefetch, DDP buckets)
    pipeline_interleave: int = 1  # model chunks per pipeline stage (Megatron's interleaved schedule)
    loss: Loss = "fused"  # materialized: the whole [tokens, vocab] logits kept to backward (unfused cross-entropy)
    # fp8: the blocks' linear layers run FP8 GEMMs (TransformerEngine / torchao float8); attention scores, the
    # output head and the optimizer stay bf16/fp32.
    precision: Precision = "bf16"
    backend: Stack = "fsdp"
    compiled: bool = False  # fsdp: torch.compile over each block (its elementwise ops fused by inductor)
    # Tensor-parallel collectives pipelined with the GEMMs they feed (TransformerEngine's userbuffers overlap, as
    # Megatron Bridge's H100 recipes enable it; torchtitan's AsyncTP); False: each waits on the critical path.
    tp_overlap: bool = False

    @property
    def kernels(self) -> Kernels:
        stack = STACKS.get(self.backend)
        if stack is not None and stack.megatron_core:  # TransformerEngine's hand-fused kernels
            return "fused"
        return "compiled" if self.compiled else "eager"

    def problems(self) -> list[PlanError]:
        out: list[PlanError] = []
        if self.backend not in STACKS:
            out.append(PlanError("backend", self.backend, f"is not one of {', '.join(STACK_NAMES)}"))
        if self.compiled and self.backend in STACKS and not STACKS[self.backend].compiles:
            compiling = " or ".join(name for name, stack in STACKS.items() if stack.compiles)
            out.append(
                PlanError("compiled", self.compiled, f"applies to backend {compiling} only, not {self.backend!r}")
            )
        if self.sharding not in SHARDINGS:
            out.append(PlanError("sharding", self.sharding, f"is not one of {', '.join(SHARDINGS)}"))
        if self.attention not in ATTENTIONS:
            out.append(PlanError("attention", self.attention, f"is not one of {', '.join(ATTENTIONS)}"))
        if self.loss not in LOSSES:
            out.append(PlanError("loss", self.loss, f"is not one of {', '.join(LOSSES)}"))
        if self.grad_reduce_bytes not in (2, 4):
            out.append(PlanError("grad_reduce_bytes", self.grad_reduce_bytes, "must be 2 (bf16) or 4 (fp32)"))
        if self.pipeline_interleave < 1:
            out.append(PlanError("pipeline_interleave", self.pipeline_interleave, "must be >= 1"))
        if self.precision not in PRECISIONS:
            out.append(PlanError("precision", self.precision, f"is not one of {', '.join(PRECISIONS)}"))
        return out


def backend_software(backend: Backend, **changes: Any) -> Software:
    """The backend's defaults as this repo runs it (slurm.backends.BACKENDS[...].software), with `changes` on top,
    timed with its stack's rates. A name no backend has is kept as the stack, for Software.problems to refuse."""
    try:
        running = backend_named(backend)
    except UserError:
        return Software(**{**changes, "backend": backend})
    return Software(**{**running.software, **changes, "backend": running.stack})


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


@dataclass(frozen=True)
class Job:
    model: ModelArgs
    hardware: Hardware
    nodes: int
    seq_len: int
    micro_batch: int
    checkpointing: Checkpointing = "none"
    every_n: int = 2  # for checkpointing="every_n": blocks 0, n, 2n, ... are checkpointed
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    global_batch: int | None = None  # sequences per optimizer step; None: one micro-batch per DP rank
    software: Software = field(default_factory=Software)
    shard_group: int | None = None  # hsdp: DP ranks one replica is sharded over (dp_shard); None: one node's
    # Context parallel: each sequence split over this many ranks (ring attention passes K and V around them).
    context_parallel: int = 1
    # LoRA of this rank on each block's lora_target_modules, the base frozen (planner/finetune.py); None: all trained.
    lora_rank: int | None = None
    lora_target_modules: tuple[str, ...] = LORA_TARGETS

    def __post_init__(self) -> None:
        problems = self.problems()
        if problems:
            raise problems[0]

    def _lora_target_problems(self) -> list[PlanError]:
        """LoRA adapts linears of the model's family (training/models/<family>/family.py), each named once."""
        family = family_named(self.model.flavor)
        adaptable = [target.hf_name for target in family.lora_targets]
        if not adaptable:
            return [PlanError("finetune", "lora", f"has no LoRA targets in model family {family.name!r}")]
        targets = self.lora_target_modules
        if not targets or any(name not in adaptable for name in targets) or len(set(targets)) < len(targets):
            return [
                PlanError(
                    "lora_target_modules",
                    targets,
                    f"names no linear layer of a {family.name} block, or one twice ({', '.join(adaptable)})",
                )
            ]
        return []

    def problems(self) -> list[PlanError]:
        out: list[PlanError] = []
        names = (
            "nodes",
            "seq_len",
            "micro_batch",
            "every_n",
            "tensor_parallel",
            "pipeline_parallel",
            "context_parallel",
        )
        for name in names:
            value = getattr(self, name)
            if not _positive_int(value):
                out.append(PlanError(name, value, "must be an integer >= 1"))
        if self.checkpointing not in CHECKPOINTING_MODES:
            out.append(
                PlanError("activation_checkpointing", self.checkpointing, f"is not one of {CHECKPOINTING_MODES}")
            )
        if self.lora_rank is not None and not _positive_int(self.lora_rank):
            out.append(PlanError("lora_rank", self.lora_rank, "must be an integer >= 1"))
        if self.lora_rank is not None:
            out.extend(self._lora_target_problems())
        if self.global_batch is not None and not _positive_int(self.global_batch):
            out.append(PlanError("global_batch", self.global_batch, "must be an integer >= 1"))
        if self.shard_group is not None and not _positive_int(self.shard_group):
            out.append(PlanError("shard_group", self.shard_group, "must be an integer >= 1"))
        elif self.shard_group is not None and self.software.sharding != "hsdp":
            out.append(PlanError("shard_group", self.shard_group, "applies only to sharding 'hsdp'"))
        out.extend(self.software.problems())
        if not out and self.software.precision == "fp8" and self.hardware.peak_fp8_flops_per_device is None:
            chip = self.hardware.accelerator.name
            out.append(
                PlanError(
                    "precision",
                    "fp8",
                    f"has no FP8 rate for {self.hardware.instance.name} ({chip}): A100s have no FP8 tensor cores, "
                    "and Trainium1's FP8 rate is not cited above its bf16 rate; plan it as bf16",
                )
            )
        accelerator = self.hardware.instance.accelerator
        # "none": the local CPU cluster's node, which llm-submit plans (memory only) for the fsdp trainer's gloo runs.
        cpu_fsdp = accelerator == "none" and self.software.backend == "fsdp"
        if not out and not cpu_fsdp and STACKS[self.software.backend].accelerator != accelerator:
            instance = self.hardware.instance.name
            # A CPU node has no stack of its own: the fsdp trainer is what runs there.
            wanted = " or ".join(name for name, stack in STACKS.items() if stack.accelerator == accelerator) or "fsdp"
            out.append(PlanError("backend", self.software.backend, f"does not run on {instance}: use {wanted}"))
        if out:
            return out
        per_node = self.hardware.devices_per_node
        tp, pp, cp = self.tensor_parallel, self.pipeline_parallel, self.context_parallel
        if per_node % tp:
            out.append(PlanError("tensor_parallel", tp, f"must divide the {per_node} devices of a node"))
        elif cp > 1 and self.seq_len % (2 * cp):
            # Megatron splits each sequence into 2 x CP chunks so every rank gets an early and a late one (causal
            # load balance)
            out.append(PlanError("context_parallel", cp, f"must divide seq_len / 2 ({self.seq_len} / 2)"))
        elif cp > 1 and self.world_size % (tp * pp * cp):
            out.append(
                PlanError(
                    "context_parallel",
                    cp,
                    f"x tensor_parallel {tp} x pipeline_parallel {pp} must divide the {self.world_size} devices",
                )
            )
        elif self.world_size % (tp * pp):
            out.append(PlanError("pipeline_parallel", pp, f"x tensor_parallel {tp} must divide {self.world_size}"))
        elif pp > self.model.n_layers:
            out.append(PlanError("pipeline_parallel", pp, f"exceeds the model's {self.model.n_layers} layers"))
        elif self.shard_group is not None and self.gradient_group_size % self.shard_group:
            out.append(
                PlanError(
                    "shard_group", self.shard_group, f"must divide the {self.gradient_group_size} data-parallel ranks"
                )
            )
        elif self.global_batch is not None and self.global_batch % (self.data_parallel * self.micro_batch):
            unit = self.data_parallel * self.micro_batch
            out.append(
                PlanError(
                    "global_batch",
                    self.global_batch,
                    f"must be a multiple of data-parallel size x micro-batch ({self.data_parallel} x "
                    f"{self.micro_batch} = {unit})",
                )
            )
        return out

    @property
    def world_size(self) -> int:
        return self.nodes * self.hardware.devices_per_node

    @property
    def data_parallel(self) -> int:
        """Ranks that take different sequences (CP ranks share a sequence, TP and PP ranks a micro-batch)."""
        return self.world_size // (self.tensor_parallel * self.pipeline_parallel * self.context_parallel)

    @property
    def gradient_group_size(self) -> int:
        """Ranks that hold the same weights and reduce gradients together: DP x CP (Megatron's data-parallel group
        with context parallel; torchtitan's dp_shard_cp mesh)."""
        return self.data_parallel * self.context_parallel

    @property
    def tokens_per_micro_batch_per_device(self) -> int:
        """Tokens one device computes per micro-batch: its share of the sequence under context parallel."""
        return self.micro_batch * self.seq_len // self.context_parallel

    @property
    def global_batch_sequences(self) -> int:
        return self.global_batch or self.data_parallel * self.micro_batch

    @property
    def micro_batches_per_step(self) -> int:
        """Micro-batches each DP rank runs per optimizer step (gradient accumulation or pipeline depth)."""
        return self.global_batch_sequences // (self.data_parallel * self.micro_batch)

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch_sequences * self.seq_len

    @property
    def recomputed_fraction(self) -> float:
        return recomputed_block_fraction(self.checkpointing, self.model.n_layers, self.every_n)

    @property
    def devices_per_node_in_dp_group(self) -> int:
        """DP ranks of one DP group that share a node. Ranks are ordered TP fastest, then DP, then PP (Megatron's
        order): TP stays on NVLink, DP fills the rest of the node, pipeline stages go across nodes. With context
        parallel the group is DP x CP (CP ranks sit between TP and DP: Megatron's tp-cp-dp-pp order)."""
        return max(1, min(self.gradient_group_size, self.hardware.devices_per_node // self.tensor_parallel))

    @property
    def context_parallel_per_node(self) -> int:
        """CP ranks of one ring that share a node (CP follows TP in the rank order)."""
        return max(1, min(self.context_parallel, self.hardware.devices_per_node // self.tensor_parallel))

    @property
    def pipeline_crosses_nodes(self) -> bool:
        return (
            self.pipeline_parallel > 1
            and self.tensor_parallel * self.gradient_group_size >= self.hardware.devices_per_node
        )

    @property
    def state_shard_size(self) -> int:
        """Ranks the sharded training state (weights, gradients, optimizer) is split over."""
        sharding = self.software.sharding
        if sharding == "fsdp":
            return self.gradient_group_size
        if sharding == "hsdp":
            return self.shard_group or min(self.gradient_group_size, self.devices_per_node_in_dp_group)
        return 1

    @property
    def replicas(self) -> int:
        """Copies of the sharded state (HSDP's replicate dimension); 1 for fsdp."""
        if self.software.sharding in ("fsdp", "hsdp"):
            return self.gradient_group_size // self.state_shard_size
        return 1

    @property
    def optimizer_shard_size(self) -> int:
        return self.gradient_group_size if self.software.sharding == "zero1" else self.state_shard_size


def unsubmittable_dims(job: Job) -> tuple[str, ...]:
    """The job's model-parallel dimensions ("tp", "pp", "cp") that no llm-submit backend of its stack lays out
    (slurm.backends' model_parallel): the FSDP trainer is data parallel only, so a TP/PP layout on its stack plans a
    PyTorch-native stack that has them (torchtitan's), for comparison. Empty: llm-submit runs the layout."""
    asked = tuple(name for name, size in (("tp", job.tensor_parallel), ("pp", job.pipeline_parallel),
                                          ("cp", job.context_parallel)) if size > 1)  # fmt: skip
    runners = [backend for backend in BACKENDS.values() if backend.stack == job.software.backend]
    if not asked or not runners or any(set(asked) <= set(backend.model_parallel) for backend in runners):
        return ()
    return asked
