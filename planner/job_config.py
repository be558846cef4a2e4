"""One mapping from a job config (training/configs/*.yaml) to the planner's Job.

`llm-plan --model job.yaml`, `llm-submit`'s memory check and its planned cost all go through `planner_job`, so the
plan is made for the job as written: its sequence length, micro and global batch, activation checkpointing and
FSDP/HSDP layout. Reading the YAML checks what the trainer would refuse on the nodes (a sequence longer than the
model's positions) before anything is queued. No torch is imported.
"""

from __future__ import annotations

from pathlib import Path

from planner.flops import Checkpointing
from planner.hardware import Hardware
from planner.job import Backend, Job, PlanError, Sharding, Software, backend_software
from planner.model_source import read_config_json
from slurm.backends import backend_named
from training.config import (
    ConfigError,
    JobConfig,
    ParallelSection,
    check_sequence_fits,
    load_job_config,
    resolve_model_args,
)
from training.finetune.config import LORA_TARGETS, LoraSection
from training.models.args import ModelArgs, ModelArgsError
from training.parallel.dims import DATA_PARALLEL_ONLY, ParallelDims

# The planner's name for a field -> the job YAML's, so a refusal names what the user wrote.
YAML_FIELDS: dict[str, str] = {
    "seq_len": "data.seq_len",
    "micro_batch": "data.micro_batch_size",
    "global_batch": "data.global_batch_size",
    "activation_checkpointing": "parallel.activation_checkpoint.mode",
    "every_n": "parallel.activation_checkpoint.every_n",
    "shard_group": "parallel.dp_shard",
}


# Activation checkpointing a backend renders whatever the YAML says: NxDT's config (launch/neuron.py) asks for
# selective recompute; the FSDP trainer and Megatron's recipes follow parallel.activation_checkpoint.
BACKEND_CHECKPOINTING: dict[str, Checkpointing] = {"neuron": "selective"}


def yaml_field(error: PlanError) -> str:
    """The refusal in the job YAML's words: `data.global_batch_size: 8 must be a multiple of ...`."""
    return f"{YAML_FIELDS.get(error.argument, error.argument)}: {error.value!r} {error.reason}"


def sharding(parallel: ParallelSection) -> Sharding:
    """FSDP over every rank, or HSDP (FSDP2's 2-D mesh) when the config replicates."""
    return "hsdp" if parallel.dp_replicate != 1 else "fsdp"


def shard_group(parallel: ParallelSection, data_parallel_ranks: int) -> int | None:
    """HSDP's shard group as the trainer builds it (training/parallel): dp_shard, or the ranks over dp_replicate."""
    if sharding(parallel) != "hsdp":
        return None
    if parallel.dp_shard != -1:
        return parallel.dp_shard
    return max(1, data_parallel_ranks // parallel.dp_replicate)


def planner_job(
    config: JobConfig,
    model: ModelArgs,
    hardware: Hardware,
    nodes: int,
    layout: ParallelDims = DATA_PARALLEL_ONLY,
    software: Software | None = None,
    backend: Backend = "fsdp",
) -> Job:
    """The planner's Job for this config on `nodes` x `hardware`, run by `backend` (slurm.backends: its own
    software defaults, its stack's rates) unless `software` says otherwise. Raises PlanError (one line) on a layout the
    planner or the trainer would refuse, a global batch that is not a whole number of micro-batches per rank
    among them."""
    parallel = config.parallel
    lora = lora_settings(config)
    checkpoint = parallel.activation_checkpoint
    devices = nodes * hardware.devices_per_node
    data_parallel = max(1, layout.data_parallel(devices))
    # float8: FP8 GEMMs in the blocks (the trainer's torchao, Bridge's TransformerEngine preset); emulated FP8 runs
    # at the high-precision rate
    precision = "fp8" if config.float8.enabled and not config.float8.emulate else "bf16"
    if software is not None:
        chosen = software
    elif backend_named(backend).yaml_layout:  # the trainer as the YAML configures it
        chosen = backend_software(backend, sharding=sharding(parallel), compiled=parallel.compile, precision=precision)
    else:  # NeMo 2's or Megatron Bridge's recipe / NxDT: their own optimizer sharding and kernels
        chosen = backend_software(backend, precision=precision)
    return Job(
        model=model,
        hardware=hardware,
        nodes=nodes,
        seq_len=config.data.seq_len,
        micro_batch=config.data.micro_batch_size,
        checkpointing=BACKEND_CHECKPOINTING.get(chosen.backend, checkpoint.mode),
        every_n=checkpoint.every_n,
        tensor_parallel=layout.tp,
        pipeline_parallel=layout.pp,
        context_parallel=layout.cp,
        global_batch=config.data.global_batch_size,
        software=chosen,
        shard_group=shard_group(parallel, data_parallel) if chosen.sharding == "hsdp" else None,
        lora_rank=lora.rank if lora is not None else None,
        lora_target_modules=lora.target_modules if lora is not None else LORA_TARGETS,
    )


def lora_settings(config: JobConfig) -> LoraSection | None:
    """The finetune: section's LoRA (the base frozen), or None: every parameter trains (pretraining, full)."""
    return config.finetune.lora_settings if config.finetune is not None else None


def read_job(path: Path, argument: str = "--model", data_vocab_size: int | None = None) -> tuple[JobConfig, ModelArgs]:
    """A job YAML and its model shape (its named shape with overrides, or its hf_checkpoint's config.json; a
    `vocab_size: data` from `data_vocab_size`, the dataset's), with the sequence checked against the model.
    PlanError names the file and the first problem."""
    try:
        config = load_job_config(path)
        section = config.model
        if section.hf_checkpoint is not None:
            args = read_config_json(Path(section.hf_checkpoint) / "config.json").replace(**section.overrides())
        else:
            args = resolve_model_args(section, data_vocab_size=data_vocab_size)
        check_sequence_fits(config.data, args)
    except (ConfigError, ModelArgsError) as error:
        first = str(error).splitlines()[0]
        raise PlanError(argument, str(path), f"is not a job config the planner can read: {first}") from None
    return config, args
