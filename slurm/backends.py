"""The training backends: one descriptor each, one registry (BACKENDS) that every package reads.

A descriptor holds a backend's torch-free facts: the accelerator it runs on, what it asks of a target (queue and
spec), the planner's software defaults and fitted stack, the bytes a checkpoint holds per parameter, and its name
in the job comment. It sits in slurm so that slurm.target, the planner and launch can all read it (the layer table,
tests/test_layers.py); how a backend renders its sbatch scripts is launch's (launch.scripts.RENDERERS, one per
entry here: tests/launch/test_renderers.py).

`--backend` names an option (fsdp, nemo, neuron); an option with more than one descriptor (nemo: NeMo 2 or Megatron
Bridge) is resolved by the spec's cluster.containers.nemo_framework, whose entry point says which framework runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypedDict

from slurm.errors import SubmitError
from spec.cluster import ClusterSpec
from spec.containers import DEFAULT_FRAMEWORK, FRAMEWORKS
from spec.platform.instances import InstanceFacts
from spec.platform.neuron import TORCHNEURON_FAMILIES, TRN2_STACK_REFUSAL

# The software stacks the planner has fitted rates for (planner.calibration): several backends may share one
# (NeMo 2 and Megatron Bridge both run Megatron Core with TransformerEngine).
Stack = Literal["fsdp", "nemo", "neuron"]
BackendAccelerator = Literal["gpu", "neuron"]
# How a job cuts its .bin/.idx data into train/validation/test (launch.data_fit): our trainer's seeded document
# runs, or Megatron's contiguous document ranges (NeMo 2, Megatron Bridge and NxDT alike).
DataSplits = Literal["trainer", "megatron"]


@dataclass(frozen=True)
class StackFacts:
    accelerator: BackendAccelerator
    kernels: str  # what the stack's fitted efficiency was measured on (llm-plan's "stack" line)
    # Megatron Core: TransformerEngine's hand-fused elementwise kernels, and gradient buckets sized by the DP group.
    megatron_core: bool = False
    compiles: bool = False  # torch.compile can fuse its blocks (planner.job.Software.compiled)


STACKS: dict[Stack, StackFacts] = {
    "fsdp": StackFacts("gpu", "PyTorch eager", compiles=True),
    "nemo": StackFacts("gpu", "Megatron Core + TransformerEngine", megatron_core=True),
    "neuron": StackFacts("neuron", "Neuron compiler"),
}


class SoftwareDefaults(TypedDict, total=False):
    """The planner's Software fields (planner.job.Software) a backend sets as it runs in this repo."""

    sharding: Literal["fsdp", "hsdp", "ddp", "zero1"]
    attention: Literal["flash", "materialized"]
    grad_reduce_bytes: int
    dp_overlap: bool
    tp_overlap: bool


# A check of the target a backend's job would run on: the refusal as one line, or None.
TargetCheck = Callable[[ClusterSpec, InstanceFacts, str], str | None]


def _needs_pyxis(cluster: ClusterSpec, facts: InstanceFacts, queue: str) -> str | None:
    if cluster.containers.pyxis:
        return None
    return "--backend nemo: the spec's cluster.containers.pyxis is false; NeMo runs in a pyxis container"


def _needs_nxdt_silicon(cluster: ClusterSpec, facts: InstanceFacts, queue: str) -> str | None:
    return (
        f"--queue: {queue!r} runs {facts.name}, {TRN2_STACK_REFUSAL}" if facts.family in TORCHNEURON_FAMILIES else None
    )


def _needs_neuron_section(cluster: ClusterSpec, facts: InstanceFacts, queue: str) -> str | None:
    if cluster.neuron is not None:
        return None
    return "--backend neuron: the spec has no cluster.neuron section (SDK version, compile cache)"


@dataclass(frozen=True)
class TrainingBackend:
    """One training backend. `name` is the registry key and the job comment's label (backend=<name>)."""

    name: str
    option: str  # what `llm-submit --backend` takes
    title: str  # the framework in words, as llm-report shows it
    stack: Stack
    software: SoftwareDefaults
    # Bytes per parameter of a checkpoint with its optimizer state (planner.stop_window sizes the stop from it).
    checkpoint_bytes_per_param: int
    data_splits: DataSplits
    # True: the job YAML's parallel: section lays the job out (FSDP/HSDP over every rank, torch.compile) and the
    # trainer checks it; False: --tensor/--pipeline/--context-parallel do (Megatron's, NxDT's own checks).
    yaml_layout: bool
    # Where and how its checkpoints are committed: "dcp" (our trainer: step-N/COMMITTED), or a layout of
    # training/checkpoint/framework_layout.py's LAYOUTS, which the job's replica watcher copies to S3.
    checkpoint_layout: str
    local_cluster: bool = False  # renders for the local CPU cluster (--local) too
    # The model-parallel dimensions its scripts lay out from llm-submit's flags ("tp", "pp", "cp", "ep"); a flag for
    # any other is refused, not dropped. The FSDP trainer is data parallel only (FSDP2/HSDP over every rank).
    model_parallel: tuple[str, ...] = ()
    # spec.containers.Framework.entry_point of the NeMo Framework containers that run this backend.
    entry_point: str | None = None
    target_checks: tuple[TargetCheck, ...] = ()

    @property
    def accelerator(self) -> BackendAccelerator:
        return STACKS[self.stack].accelerator

    def check_target(self, cluster: ClusterSpec, facts: InstanceFacts, queue: str) -> None:
        for check in self.target_checks:
            refusal = check(cluster, facts, queue)
            if refusal:
                raise SubmitError(refusal)


# Megatron (NeMo 2, Megatron Bridge): bf16 weights, the distributed optimizer's fp32 main copy and two fp32 moments.
_MEGATRON_CHECKPOINT_BYTES = 14

BACKENDS: dict[str, TrainingBackend] = {
    backend.name: backend
    for backend in (
        # This repo's FSDP2 trainer: fp32 gradient reduction, fused loss; fp32 weights and AdamW's two moments saved.
        TrainingBackend(
            name="fsdp",
            option="fsdp",
            title="FSDP trainer",
            stack="fsdp",
            software={},
            checkpoint_bytes_per_param=12,
            data_splits="trainer",
            yaml_layout=True,
            checkpoint_layout="dcp",
            local_cluster=True,
        ),
        # NeMo 2.4 (nemo:25.07) runs NeMo's llama3_8b pretrain_recipe with our overrides (launch.nemo): its
        # MegatronStrategy has the distributed optimizer with grad_reduce_in_fp32, overlap_grad_reduce and
        # overlap_param_gather; TP communication overlap comes only with performance_mode's callback, not set here.
        TrainingBackend(
            name="nemo2",
            option="nemo",
            title="NeMo 2",
            stack="nemo",
            software={"sharding": "zero1", "tp_overlap": False},
            checkpoint_bytes_per_param=_MEGATRON_CHECKPOINT_BYTES,
            data_splits="megatron",
            yaml_layout=False,
            checkpoint_layout="lightning",
            entry_point="nemo_pretrain.py",
            target_checks=(_needs_pyxis,),
            model_parallel=("tp", "pp", "cp", "ep"),
        ),
        # Megatron Bridge's pretraining recipe: the distributed optimizer (ZeRO-1 with overlapped gradient
        # reduce-scatter and parameter all-gather), fp32 gradient reduction, TE's TP overlap, fused cross-entropy.
        TrainingBackend(
            name="bridge",
            option="nemo",
            title="Megatron Bridge",
            stack="nemo",
            software={"sharding": "zero1", "tp_overlap": True},
            checkpoint_bytes_per_param=_MEGATRON_CHECKPOINT_BYTES,
            data_splits="megatron",
            yaml_layout=False,
            checkpoint_layout="megatron",
            entry_point="bridge_pretrain.py",
            target_checks=(_needs_pyxis,),
            model_parallel=("tp", "pp", "cp", "ep"),
        ),
        # NxDT on Trainium: ZeRO-1, bf16 gradients, no overlap, scores materialized by the compiler. It saves
        # nothing on a stop: only the step in flight has to end.
        TrainingBackend(
            name="neuron",
            option="neuron",
            title="NxDT",
            stack="neuron",
            software={"sharding": "zero1", "attention": "materialized", "grad_reduce_bytes": 2, "dp_overlap": False},
            checkpoint_bytes_per_param=0,
            data_splits="megatron",
            yaml_layout=False,
            checkpoint_layout="lightning",
            target_checks=(_needs_nxdt_silicon, _needs_neuron_section),
            model_parallel=("tp", "pp"),  # NxDT's tensor and pipeline parallel (launch.neuron)
        ),
    )
}
# What `--backend` takes, in the registry's order.
OPTIONS: tuple[str, ...] = tuple(dict.fromkeys(backend.option for backend in BACKENDS.values()))


def resolve_backend(option: str, nemo_framework: str | None = None) -> TrainingBackend:
    """The backend `--backend option` runs: the option's only descriptor, or the one whose entry point the spec's
    container framework (cluster.containers.nemo_framework; None: the default) has."""
    candidates = [backend for backend in BACKENDS.values() if backend.option == option]
    if not candidates:
        raise SubmitError(f"--backend: {option!r} is not one of {', '.join(OPTIONS)}")
    if len(candidates) == 1:
        return candidates[0]
    framework = FRAMEWORKS[nemo_framework or DEFAULT_FRAMEWORK]
    for backend in candidates:
        if backend.entry_point == framework.entry_point:
            return backend
    raise SubmitError(
        f"cluster.containers.nemo_framework: {nemo_framework!r} runs {framework.entry_point}, which no "
        f"--backend {option} descriptor renders (slurm.backends.BACKENDS)"
    )


def backend_named(name: str) -> TrainingBackend:
    """A descriptor by its name, or by an option (resolved as with the default container framework)."""
    return BACKENDS[name] if name in BACKENDS else resolve_backend(name)


def default_backend(accelerator: str) -> TrainingBackend | None:
    """The first backend (in the registry's order) that runs on `accelerator`; None for a node with neither."""
    return next((backend for backend in BACKENDS.values() if backend.accelerator == accelerator), None)
