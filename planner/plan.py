"""Capacity and cost planner: does a job fit, how fast does it run, how long and how much for N tokens.

    python -m planner.plan --model llama3-8b --instance p5.48xlarge --nodes 4 --seq 8192 --micro-batch 1 \\
        --activation-checkpointing selective --tokens 1T [--json]
    python -m planner.plan ... --compare      # the same job as FSDP, HSDP and TP + FSDP, side by side
    python -m planner.plan --model path/to/config.json ...   # any dense decoder by its Hugging Face config
    python -m planner.plan --model training/configs/1b.yaml --instance p5.48xlarge --nodes 1   # a job as written
    python -m planner.plan --model tiny --instance local-cpu --nodes 2 ...   # the local CPU cluster: memory only

The model behind the numbers (and how well it reproduces published tables) is in docs/planner.md. A "device"
is one training worker: a GPU, a NeuronCore on Trainium, or a node of the local CPU cluster (local-cpu), where the
planner has no rate: it plans the layout and memory as llm-submit --local does, and times and costs nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from planner.backend_family import refuse_backend_family
from planner.calibration import CALIBRATED, LOCAL_LINK_EFFICIENCY
from planner.checkpoint_interval import CheckpointInterval, checkpoint_interval
from planner.cost import CostEstimate, job_cost
from planner.data_size import storage_plan
from planner.finetune import FINETUNE_MODES
from planner.flops import (
    CHECKPOINTING_MODES,
    hardware_flops_per_token,
    megatron_flops_per_token,
    model_flops_per_token,
)
from planner.hardware import Hardware, HardwareError, hardware
from planner.job import (
    ATTENTIONS,
    PRECISIONS,
    SHARDINGS,
    Backend,
    Job,
    PlanError,
    Sharding,
    Software,
    backend_software,
    unsubmittable_dims,
)
from planner.job_config import YAML_FIELDS, planner_job, read_job
from planner.job_config import sharding as sharding_of
from planner.layouts import as_json as layouts_json
from planner.layouts import compare_layouts, ranked, render_table
from planner.memory import MemoryEstimate, fits_message, job_memory
from planner.model_source import dataset_vocab_size, is_job_yaml, mixture_vocab_size, resolve_model
from planner.step_time import StepEstimate, estimate_step
from planner.stop_window import stop_window
from slurm.backends import BACKENDS, OPTIONS, STACKS, backend_named, default_backend
from spec.cli import OneLineParser, user_errors
from spec.cli_types import non_negative_float
from spec.cluster import FsxSpec
from training.config import CheckpointSection, ConfigError, check_sequence_fits, load_job_config
from training.finetune.config import DEFAULT_LORA_RANK
from training.models.args import ModelArgs
from training.models.params import ParamCounts, count_parameters
from training.models.registry import MODEL_CONFIGS
from training.parallel.dims import ParallelDims

# Job field -> command-line flag, so errors name what the user typed.
FLAGS: dict[str, str] = {
    "nodes": "--nodes",
    "seq_len": "--seq",
    "micro_batch": "--micro-batch",
    "every_n": "--every-n",
    "tensor_parallel": "--tensor-parallel",
    "pipeline_parallel": "--pipeline-parallel",
    "global_batch": "--global-batch",
    "activation_checkpointing": "--activation-checkpointing",
    "sharding": "--sharding",
    "attention": "--attention",
    "pipeline_interleave": "--pipeline-interleave",
    "grad_reduce_bytes": "--grad-reduce",
    "shard_group": "--shard-group",
    "context_parallel": "--context-parallel",
    "precision": "--precision",
    "backend": "--backend",
    "compiled": "--compile",
}
# --backend: what llm-submit takes, then each backend's own name (nemo2 and bridge are both --backend nemo there).
BACKEND_CHOICES: tuple[str, ...] = (*OPTIONS, *(name for name in BACKENDS if name not in OPTIONS))
COMPARE_ROWS_SHOWN = 12  # --compare's table: the best dozen layouts; --json has them all
_SUFFIXES = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}


def parse_tokens(text: str) -> float:
    """'2e12', '2T', '300B', '1_000_000' -> tokens."""
    match = re.fullmatch(r"\s*([0-9][0-9_]*(?:\.[0-9]+)?(?:e[0-9]+)?)\s*([kmbgt]?)\s*", text.lower())
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a token count (examples: 2e12, 2T, 300B)")
    value = float(match.group(1).replace("_", "")) * _SUFFIXES[match.group(2)]
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return value


def known_models() -> dict[str, ModelArgs]:
    """The named shapes: the trainer's registry, which holds the published tables' shapes too."""
    return MODEL_CONFIGS


def _named(error: PlanError, options: argparse.Namespace) -> str:
    """What the user wrote that the planner refuses: the flag, or the job YAML's field when no flag set it."""
    flag = FLAGS.get(error.argument, error.argument)
    field = YAML_FIELDS.get(error.argument)
    option = flag.removeprefix("--").replace("-", "_")
    if field is not None and is_job_yaml(options.model) and getattr(options, option, None) is None:
        return f"--model {options.model}: {field}"
    return flag


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m planner.plan", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--model",
        required=True,
        help=f"one of: {', '.join(known_models())}; or a Hugging Face config.json (dense Llama/Mistral/Qwen3-style "
        "decoder), a directory holding one, or a job YAML",
    )
    parser.add_argument(
        "--instance",
        required=True,
        help="instance type, e.g. p5.48xlarge, p4de.24xlarge, trn1.32xlarge; or local-cpu, the local CPU cluster's "
        "node (make demo): its layout and memory as llm-submit --local plans them, no time or cost",
    )
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument(
        "--seq",
        type=int,
        default=None,
        help="tokens per sequence (default: a job YAML's, else the model's max_seq_len)",
    )
    parser.add_argument(
        "--micro-batch",
        type=int,
        default=None,
        help="sequences per device per forward pass (default: a job YAML's, else 1)",
    )
    parser.add_argument(
        "--activation-checkpointing",
        default=None,
        choices=CHECKPOINTING_MODES,
        help="default: a job YAML's, else none",
    )
    parser.add_argument(
        "--every-n", type=int, default=None, help="with every_n: checkpoint blocks 0, n, 2n, ... (default 2)"
    )
    parser.add_argument("--tensor-parallel", type=int, default=1)
    parser.add_argument("--pipeline-parallel", type=int, default=1)
    parser.add_argument("--pipeline-interleave", type=int, default=1, help="model chunks per pipeline stage")
    parser.add_argument(
        "--context-parallel", type=int, default=1, help="ranks each sequence is split over (ring attention)"
    )
    parser.add_argument(
        "--precision",
        default="bf16",
        choices=PRECISIONS,
        help="fp8: the blocks' linear layers at the instance's FP8 peak (H100/H200); the rest bf16",
    )
    parser.add_argument(
        "--backend",
        default=None,
        choices=BACKEND_CHOICES,
        help="the backend that runs the job, as llm-submit names it (nemo: the default container's Megatron Bridge) "
        "or by its own name (nemo2, bridge); each stack has its own fitted speed, each backend its own settings "
        "(default: neuron on Trainium, else fsdp)",
    )
    parser.add_argument(
        "--compile", action="store_true", help="fsdp: torch.compile each block (a job YAML's parallel.compile)"
    )
    parser.add_argument(
        "--sharding",
        default=None,
        choices=SHARDINGS,
        help="default: a job YAML's (hsdp when it replicates), else fsdp; zero1 (the distributed optimizer) on nemo "
        "and neuron",
    )
    parser.add_argument(
        "--shard-group", type=int, default=None, help="hsdp: ranks one replica is sharded over (default: one node)"
    )
    parser.add_argument(
        "--attention", default=None, choices=ATTENTIONS, help="default: materialized on neuron, else flash"
    )
    parser.add_argument(
        "--grad-reduce",
        default=None,
        choices=("fp32", "bf16"),
        help="gradient dtype on the wire (default: bf16 on neuron, else fp32)",
    )
    parser.add_argument("--no-overlap", action="store_true", help="data-parallel collectives do not overlap compute")
    parser.add_argument(
        "--global-batch",
        type=int,
        default=None,
        help="sequences per optimizer step (default: a job YAML's, else one micro-batch per data-parallel rank)",
    )
    parser.add_argument(
        "--finetune",
        choices=FINETUNE_MODES,
        help="full: every parameter trains (the default plan); lora: the base frozen in bf16, adapters on every linear",
    )
    parser.add_argument("--lora-rank", type=int, help=f"with --finetune lora (default {DEFAULT_LORA_RANK})")
    parser.add_argument(
        "--data-prefix", help="with --model job.yaml: the prepared dataset whose vocabulary `vocab_size: data` reads"
    )
    parser.add_argument("--tokens", type=parse_tokens, default=None, help="tokens to train on (2e12, 2T, 300B)")
    parser.add_argument(
        "--price-per-hour", type=non_negative_float, default=None, help="USD per node-hour (default: on-demand)"
    )
    parser.add_argument(
        "--spec", default=None, help="deployment spec whose cluster.prices overrides the on-demand price table"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--compare", action="store_true", help="print the job under each layout: FSDP, HSDP, TP + FSDP")
    return parser


def backend_of(options: argparse.Namespace, node: Hardware) -> Backend:
    if options.backend is not None:
        return str(options.backend)
    default = default_backend(node.instance.accelerator)
    return default.name if default is not None else "fsdp"  # the local CPU cluster runs the fsdp trainer


def _software(options: argparse.Namespace, node: Hardware, sharding: Sharding | None, compiled: bool) -> Software:
    """--backend's defaults (planner.job.backend_software), each flag given over them."""
    backend = backend_of(options, node)
    changes: dict[str, Any] = {
        "pipeline_interleave": options.pipeline_interleave,
        "precision": options.precision,
        "compiled": compiled,
    }
    if sharding is not None:
        changes["sharding"] = sharding
    if options.attention is not None:
        changes["attention"] = options.attention
    if options.grad_reduce is not None:
        changes["grad_reduce_bytes"] = 4 if options.grad_reduce == "fp32" else 2
    if options.no_overlap:
        changes["dp_overlap"] = False
    return backend_software(backend, **changes)


# A job YAML's data fields that a flag overrides, and the flag's option name (checkpointing: below).
_JOB_FIELDS: dict[str, str] = {
    "data.seq_len": "seq",
    "data.micro_batch_size": "micro_batch",
    "data.global_batch_size": "global_batch",
}


def _job_from_yaml(options: argparse.Namespace, node: Hardware) -> Job:
    """--model job.yaml: the job as written (planner.job_config), any flag given overriding its field."""
    vocab = dataset_vocab_size(options.data_prefix) if options.data_prefix else mixture_vocab_size(options.model)
    config, model = read_job(Path(options.model), data_vocab_size=vocab)
    overrides: dict[str, Any] = {
        field: getattr(options, name) for field, name in _JOB_FIELDS.items() if getattr(options, name) is not None
    }
    if options.activation_checkpointing is not None or options.every_n is not None:
        current = config.parallel.activation_checkpoint
        overrides["parallel.activation_checkpoint"] = {
            "mode": current.mode if options.activation_checkpointing is None else options.activation_checkpointing,
            "every_n": current.every_n if options.every_n is None else options.every_n,
        }
    if overrides:
        try:
            config = config.with_overrides(**overrides)
            check_sequence_fits(config.data, model)
        except ConfigError as error:
            raise PlanError(
                "--model", options.model, f"with the flags given: {str(error).splitlines()[0].removeprefix('config: ')}"
            ) from None
    layout = ParallelDims(tp=options.tensor_parallel, pp=options.pipeline_parallel, cp=options.context_parallel)
    backend = backend_of(options, node)
    yaml_layout = backend_named(backend).yaml_layout
    yaml_sharding = sharding_of(config.parallel) if yaml_layout else None
    compiled = options.compile or (yaml_layout and config.parallel.compile)
    software = _software(options, node, options.sharding or yaml_sharding, compiled)
    job = planner_job(config, model, node, options.nodes, layout, software)
    return job if options.shard_group is None else dataclasses.replace(job, shard_group=options.shard_group)


def _finetuned(job: Job, options: argparse.Namespace) -> Job:
    """--finetune / --lora-rank over what the job (or its YAML's finetune: section) says."""
    if options.lora_rank is not None and options.finetune != "lora" and job.lora_rank is None:
        raise PlanError("--lora-rank", options.lora_rank, "applies only with --finetune lora")
    if options.finetune == "full":
        return dataclasses.replace(job, lora_rank=None)
    if options.finetune == "lora" or options.lora_rank is not None:
        return dataclasses.replace(job, lora_rank=options.lora_rank or job.lora_rank or DEFAULT_LORA_RANK)
    return job


def job_from_args(options: argparse.Namespace) -> Job:
    job = _finetuned(_job_from_options(options), options)
    backend = backend_of(options, job.hardware)
    refuse_backend_family(backend, backend_named(backend), job.model.flavor)
    return job


# Flags that only time or cost a job, refused where the planner has no rate (the local CPU cluster): -> the rest of
# the one-line refusal after the flag.
_TIMING_FLAGS: dict[str, str] = {
    "tokens": "{value:g}: time and cost are not modelled on {node}; plan its memory without --tokens",
    "price_per_hour": "{value!r}: time and cost are not modelled on {node}; plan its memory without --price-per-hour",
    "spec": "{value!r}: time and cost are not modelled on {node}; plan its memory without --spec",
    "compare": "layouts are ranked by their time, which is not modelled on {node}; plan one layout without --compare",
}


def _refuse_timing_flags(options: argparse.Namespace, node: Hardware) -> None:
    """On a node the planner cannot time, a flag that only times or costs the job is refused, not ignored."""
    if node.timed:
        return
    for option, rest in _TIMING_FLAGS.items():
        value = getattr(options, option)
        if value is not None and value is not False:
            flag = "--" + option.replace("_", "-")
            where = f"{node.label} (the local CPU cluster)"
            raise HardwareError(f"{flag}: {rest.format(value=value, node=where)}")


def _job_from_options(options: argparse.Namespace) -> Job:
    _refuse_timing_flags(options, hardware(options.instance))
    node = hardware(options.instance, usd_per_hour=_price(options))
    if is_job_yaml(options.model):
        return _job_from_yaml(options, node)
    if options.data_prefix:
        raise PlanError("--data-prefix", options.data_prefix, "applies only with --model job.yaml")
    model = resolve_model(options.model, known_models())
    return Job(
        model=model,
        hardware=node,
        nodes=options.nodes,
        seq_len=model.max_seq_len if options.seq is None else options.seq,
        micro_batch=1 if options.micro_batch is None else options.micro_batch,
        checkpointing=options.activation_checkpointing or "none",
        every_n=2 if options.every_n is None else options.every_n,
        tensor_parallel=options.tensor_parallel,
        pipeline_parallel=options.pipeline_parallel,
        global_batch=options.global_batch,
        software=_software(options, node, options.sharding, options.compile),
        shard_group=options.shard_group,
        context_parallel=options.context_parallel,
    )


def _spec(options: argparse.Namespace) -> Any:
    from spec import SpecError, load_spec

    try:
        return load_spec(options.spec)
    except SpecError as error:
        raise PlanError("--spec", options.spec, f"is not a valid spec: {str(error).splitlines()[0]}") from None


def _price(options: argparse.Namespace) -> float | None:
    """--price-per-hour, else the spec's cluster.prices for the instance, else None (the table's on-demand price)."""
    if options.price_per_hour is not None or options.spec is None:
        return options.price_per_hour
    spec = _spec(options)
    prices = spec.cluster.prices if spec.cluster is not None else {}
    return prices.get(options.instance)


def _fsx(options: argparse.Namespace) -> FsxSpec | None:
    """Where checkpoints are written: --spec's file system (None: it has none), else the default spec's."""
    if options.spec is None:
        return FsxSpec()
    spec = _spec(options)
    return spec.cluster.fsx if spec.cluster is not None else None


def planned_checkpoint_interval(job: Job, step: StepEstimate, fsx: FsxSpec | None) -> CheckpointInterval | None:
    """Young's checkpoint interval for the job: its backend's checkpoint written at the file system's throughput."""
    if fsx is None:
        return None
    window = stop_window(job.model, job.software.backend, fsx, step.step_s)
    return checkpoint_interval(window.save_s, step.step_s, job.nodes * job.hardware.instance.accelerators_per_node)


# plan_report's keys that time or cost the job: null where the planner has no rate (the local CPU cluster).
TIMED_KEYS: tuple[str, ...] = (
    "peak_flops_per_device", "peak_fp8_flops_per_device", "time_s", "communication_per_step", "step_time_s",
    "tokens_per_s", "tokens_per_s_per_device", "mfu", "hfu", "model_tflops_per_device", "cost_per_hour_usd",
    "tokens_per_usd", "tokens", "days", "cost_usd", "checkpoint_interval",
)  # fmt: skip


def flops_per_token(job: Job) -> dict[str, float]:
    """FLOPs per token by both formulas and with the job's recompute: counts, so known on any node."""
    return {
        "model_6n_plus_attention": model_flops_per_token(job.model, job.seq_len),
        "megatron_96bslh2_per_token": megatron_flops_per_token(job.model, job.seq_len, recompute=True),
        "hardware_with_recompute": hardware_flops_per_token(job.model, job.seq_len, job.recomputed_fraction),
    }


def plan_report(
    job: Job, tokens: float | None = None, fsx: FsxSpec | None = None, keep_last: int | None = None
) -> dict[str, Any]:
    """Everything the planner knows about a job, as one JSON-able object; `fsx`: where it checkpoints and its data
    lies, `keep_last`: the checkpoints a run keeps (default the trainer's). On a node it cannot time (local-cpu) the
    TIMED_KEYS are null and `timed` is false. `storage` (with `tokens`): the prepared data's bytes and whether the
    file system holds them beside the checkpoints."""
    report = _untimed_report(job)
    timed = _timed_report(job, tokens, fsx) if job.hardware.timed else dict.fromkeys(TIMED_KEYS)
    storage = None
    if tokens is not None:
        kept = CheckpointSection().keep_last if keep_last is None else keep_last
        planned = storage_plan(job.model, job.software.backend, tokens, kept, fsx)
        storage = {**dataclasses.asdict(planned), "needed_bytes": planned.needed_bytes, "fits": planned.fits}
    return {**report, **timed, "timed": job.hardware.timed, "storage": storage}


def _untimed_report(job: Job) -> dict[str, Any]:
    memory = job_memory(job)
    counts = count_parameters(job.model)
    hw = job.hardware
    return {
        "model": {
            "parameters": counts.total,
            "active_parameters": counts.active,
            "matmul_parameters": counts.flop_params,
        },
        "instance": hw.instance.name,
        "hardware": hw.label,
        "nodes": job.nodes,
        "devices": job.world_size,
        "layout": {
            "tensor_parallel": job.tensor_parallel,
            "pipeline_parallel": job.pipeline_parallel,
            "pipeline_interleave": job.software.pipeline_interleave,
            "context_parallel": job.context_parallel,
            "data_parallel": job.data_parallel,
            "sharding": job.software.sharding,
            "weights_and_gradients_sharded_over": job.state_shard_size,
            "replicas": job.replicas,
            "optimizer_sharded_over": job.optimizer_shard_size,
            "global_batch_sequences": job.global_batch_sequences,
            "tokens_per_step": job.tokens_per_step,
            "micro_batches_per_step": job.micro_batches_per_step,
        },
        "fits": memory.fits,
        "fits_message": fits_message(job, memory),
        "memory_gib_per_device": memory.total_gib,
        "memory_capacity_gib_per_device": memory.capacity_gib,
        "memory_breakdown_gib": memory.breakdown(),
        "flops_per_token": flops_per_token(job),
        "precision": job.software.precision,
        "backend": job.software.backend,
        "kernels": job.software.kernels,
    }


def _timed_report(job: Job, tokens: float | None, fsx: FsxSpec | None) -> dict[str, Any]:
    step = estimate_step(job)
    cost = job_cost(job, step, tokens)
    interval = planned_checkpoint_interval(job, step, fsx)
    hw = job.hardware
    return {
        "peak_flops_per_device": step.peak_flops_per_device,
        "peak_fp8_flops_per_device": hw.peak_fp8_flops_per_device,
        "time_s": {
            "matmul": step.matmul_s,
            "memory_bound": step.memory_bound_s,
            "tensor_parallel_comm": step.tensor_parallel.seconds,
            "tensor_parallel_exposed": step.tensor_parallel_exposed_s,
            "context_parallel_comm": step.context_parallel.seconds,
            "context_parallel_exposed": step.context_parallel_exposed_s,
            "pipeline_p2p": step.pipeline_p2p.seconds,
            "pipeline_bubble": step.pipeline_bubble_s,
            "data_parallel_comm": step.data_parallel.seconds,
            "data_parallel_comm_by_collective": step.data_parallel_breakdown,
            "data_parallel_exposed": step.data_parallel_exposed_s,
            "optimizer": step.optimizer_s,
        },
        "communication_per_step": {
            "network_bytes_per_node": step.data_parallel.network_bytes_per_node
            + step.pipeline_p2p.network_bytes_per_node
            + step.context_parallel.network_bytes_per_node,
            "local_link_bytes_per_device": step.data_parallel.local_bytes_per_device
            + step.tensor_parallel.local_bytes_per_device
            + step.pipeline_p2p.local_bytes_per_device,
            "network_gbps_per_node": hw.instance.network_gbps,
            "network_efficiency": CALIBRATED.network_efficiency,
            "local_link_gbytes_per_s_per_device": hw.local_link_bytes_per_s_per_device / 1e9,
            "local_link_efficiency": LOCAL_LINK_EFFICIENCY,
            "overlap_fraction": CALIBRATED.overlap(job.software.backend) if job.software.dp_overlap else 0.0,
        },
        "step_time_s": step.step_s,
        "tokens_per_s": step.tokens_per_s,
        "tokens_per_s_per_device": step.tokens_per_s_per_device,
        "mfu": step.mfu,
        "hfu": step.hfu,
        "model_tflops_per_device": step.model_tflops_per_device,
        "cost_per_hour_usd": cost.usd_per_hour,
        "tokens_per_usd": cost.tokens_per_usd,
        "tokens": tokens,
        "days": cost.days,
        "cost_usd": cost.usd,
        "checkpoint_interval": interval.as_json() if interval is not None else None,
    }


def _stack(job: Job) -> str:
    """What the backend's efficiency was fitted on, in a few words (docs/planner.md, "Backends")."""
    software = job.software
    kernels = STACKS[software.backend].kernels
    if software.compiled:
        kernels = "torch.compile"
    return kernels + (", TP overlapped" if software.tp_overlap and job.tensor_parallel > 1 else "")


def _interleave(job: Job) -> str:
    v = job.software.pipeline_interleave
    return f" (interleave {v})" if job.pipeline_parallel > 1 and v > 1 else ""


def _fp8_peak(job: Job) -> str:
    fp8 = job.hardware.peak_fp8_flops_per_device
    if job.software.precision != "fp8" or fp8 is None:
        return ""
    return f"; precision fp8: block linears at {fp8 / 1e12:.0f} TFLOP/s dense FP8"


def _timed(label: str, seconds: float) -> str:
    return f"  {label:<32} {seconds:9.3f} s"


def _gb(value: float) -> str:
    return f"{value / 1e9:,.1f} GB"


def _parameters(total: int) -> str:
    """Billions, or millions below a billion (the CPU demos' 0.00 B said nothing)."""
    return f"{total / 1e9:.2f} B" if total >= 1e9 else f"{total / 1e6:.2f} M"


def _parameter_line(counts: ParamCounts) -> str:
    """ "N parameters", with the active ones of a mixture of experts (what one token's FLOPs use)."""
    if counts.active == counts.total:
        return f"{_parameters(counts.total)} parameters"
    return f"{_parameters(counts.total)} parameters ({_parameters(counts.active)} active)"


def _not_submittable(job: Job) -> list[str]:
    """A line when llm-submit's backend for this stack would refuse the layout (planner.job.unsubmittable_dims)."""
    dims = unsubmittable_dims(job)
    if not dims:
        return []
    option = next(b.option for b in BACKENDS.values() if b.stack == job.software.backend)
    return [
        f"note: llm-submit --backend {option} does not run {' x '.join(d.upper() for d in dims)}; planned as a "
        "PyTorch-native stack that does (torchtitan's), for comparison"
    ]


def _layout_and_memory(job: Job, memory: MemoryEstimate) -> list[str]:
    hw, counts = job.hardware, count_parameters(job.model)
    lines = [
        f"{_parameter_line(counts)} on {job.nodes} x {hw.label} ({job.world_size} devices, "
        f"{hw.accelerator.name}), seq {job.seq_len}, micro-batch {job.micro_batch}, checkpointing "
        f"{job.checkpointing}",
        f"backend {job.software.backend} ({_stack(job)}); "
        f"layout: TP {job.tensor_parallel} x PP {job.pipeline_parallel}{_interleave(job)} x CP {job.context_parallel} "
        f"x DP {job.data_parallel} "
        f"({job.software.sharding}: weights/grads over {job.state_shard_size}, optimizer over "
        f"{job.optimizer_shard_size}); global batch "
        f"{job.global_batch_sequences} sequences = {job.tokens_per_step:,} tokens; "
        f"{job.micro_batches_per_step} micro-batch(es) per step",
        *_not_submittable(job),
        "",
        f"memory per device: {memory.total_gib:.1f} of {memory.capacity_gib:.1f} GiB "
        f"-> {'fits' if memory.fits else 'DOES NOT FIT'}",
    ]
    lines += [f"  {name:<16} {gib:8.2f} GiB" for name, gib in memory.breakdown().items()]
    if not memory.fits:
        lines.append(f"  {fits_message(job, memory)}")
    return lines


def render_untimed_text(job: Job, memory: MemoryEstimate) -> str:
    """The plan on a node without a rate (local-cpu): its layout and memory, and that nothing is timed."""
    return "\n".join(
        [
            *_layout_and_memory(job, memory),
            "",
            f"time and cost: not modelled on the local CPU cluster ({job.hardware.label} has no rate to time with)",
        ]
    )


def render_text(
    job: Job,
    memory: MemoryEstimate,
    step: StepEstimate,
    cost: CostEstimate,
    tokens: float | None,
    interval: CheckpointInterval | None = None,
    storage: list[str] | None = None,
) -> str:
    """`storage`: the lines of planner.data_size's StoragePlan (the prepared data's bytes, the FSx warning)."""
    hw, counts = job.hardware, count_parameters(job.model)
    peak_t = step.peak_flops_per_device / 1e12
    fraction = CALIBRATED.matmul(job.software.backend, hw.accelerator.compute_die)
    lines = _layout_and_memory(job, memory)
    lines += [
        "",
        "FLOPs per token",
        f"  6N + 12 l h s (model, MFU)        {step.model_flops_per_token:.3e}  (N = {counts.flop_params:.3e})",
        f"  96 B s l h^2 (...) / (B s)        {step.megatron_flops_per_token:.3e}  (Megatron, counts full recompute)",
        f"  with this job's recompute (HFU)   {step.hardware_flops_per_token:.3e}",
        f"  peak: {peak_t:.0f} TFLOP/s per device, dense bf16{_fp8_peak(job)}",
        "",
        "time per step",
        _timed(f"matmul (at {fraction:.0%} of peak)", step.matmul_s),
        _timed("memory-bound ops", step.memory_bound_s),
        _timed("tensor-parallel all-reduces", step.tensor_parallel.seconds),
        *(
            [_timed("  exposed (the rest behind GEMMs)", step.tensor_parallel_exposed_s)]
            if job.software.tp_overlap
            else []
        ),
        _timed("context-parallel K/V ring (exposed)", step.context_parallel_exposed_s),
        _timed("pipeline sends + bubble", step.pipeline_p2p.seconds + step.pipeline_bubble_s),
        _timed("data-parallel comm (in all)", step.data_parallel.seconds),
        *(
            _timed(f"  {name.replace('_', ' ')}", seconds)
            for name, seconds in step.data_parallel_breakdown.items()
            if seconds > 0
        ),
        f"    network: {_gb(step.data_parallel.network_bytes_per_node)} per node over "
        f"{hw.instance.network_gbps:g} Gbps at {CALIBRATED.network_efficiency:.0%}; local links: "
        f"{_gb(step.data_parallel.local_bytes_per_device)} per device at "
        f"{hw.local_link_bytes_per_s_per_device / 1e9:.0f} GB/s x {LOCAL_LINK_EFFICIENCY:.0%}",
        _timed("data-parallel comm (exposed)", step.data_parallel_exposed_s),
        _timed("optimizer step", step.optimizer_s),
        _timed("step", step.step_s),
        "",
        f"throughput: {step.tokens_per_s_per_device:,.0f} tokens/s per device, {step.tokens_per_s:,.0f} tokens/s "
        f"in all; MFU {step.mfu:.1%}, HFU {step.hfu:.1%} (of the bf16 peak); {step.model_tflops_per_device:,.0f} model "
        "TFLOP/s per device",
        f"cost: ${cost.usd_per_hour:,.2f}/h for {job.nodes} nodes, {cost.tokens_per_usd:,.0f} tokens per $",
    ]
    if step.pipeline_bubble_s > 0.2 * step.step_s:
        lines.append(
            f"note: the pipeline bubble is {step.pipeline_bubble_s / step.step_s:.0%} of the step; more micro-batches "
            "per step (--global-batch) shrink it"
        )
    if tokens is not None and cost.days is not None and cost.usd is not None:
        lines.append(f"{tokens:.3g} tokens: {cost.days:,.1f} days, ${cost.usd:,.0f}")
    lines += storage or []
    if interval is not None:
        lines.append(interval.summary())
    return "\n".join(lines)


def render_text_header(job: Job) -> str:
    counts, hw = count_parameters(job.model), job.hardware
    return (
        f"{_parameter_line(counts)} on {job.nodes} x {hw.label} ({job.world_size} devices), seq "
        f"{job.seq_len}, micro-batch {job.micro_batch}, checkpointing {job.checkpointing}, global batch "
        f"{job.global_batch_sequences} sequences in every layout, precision {job.software.precision}, backend "
        f"{job.software.backend}; ranked: "
        "layouts that fit first, then the most tokens/s (the fewest days and dollars)\n"
    )


@user_errors
def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    options = parser.parse_args(argv)
    try:
        job = job_from_args(options)
    except PlanError as error:
        parser.exit(2, f"{parser.prog}: error: {_named(error, options)}: {error.value!r} {error.reason}\n")
    except HardwareError as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    if options.compare:
        plans = ranked(compare_layouts(job, options.tokens))
        if options.json:
            print(json.dumps({"layouts": layouts_json(plans)}, indent=2))
        else:
            print(render_text_header(job))
            print(render_table(plans, limit=COMPARE_ROWS_SHOWN))
        return 0
    try:
        fsx = _fsx(options)
    except PlanError as error:
        parser.exit(2, f"{parser.prog}: error: {_named(error, options)}: {error.value!r} {error.reason}\n")
    if options.json:
        print(json.dumps(plan_report(job, options.tokens, fsx, _keep_last(options)), indent=2))
        return 0
    if not job.hardware.timed:
        print(render_untimed_text(job, job_memory(job)))
        return 0
    memory, step = job_memory(job), estimate_step(job)
    interval = planned_checkpoint_interval(job, step, fsx)
    storage = None
    if options.tokens is not None:
        storage = storage_plan(job.model, job.software.backend, options.tokens, _keep_last(options), fsx).lines()
    print(render_text(job, memory, step, job_cost(job, step, options.tokens), options.tokens, interval, storage))
    return 0


def _keep_last(options: argparse.Namespace) -> int:
    """The checkpoints a run keeps: a job YAML's checkpoint.keep_last, else the trainer's default."""
    if is_job_yaml(options.model):
        return load_job_config(options.model).checkpoint.keep_last
    return CheckpointSection().keep_last


if __name__ == "__main__":
    sys.exit(main())
