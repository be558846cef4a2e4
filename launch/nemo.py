"""The NeMo 2 job config: a recipe (Llama shape) plus dotted overrides rendered from our job config, read inside
the container by launch/jobs/nemo_pretrain.py. Same shape, sequence, batch and LR schedule as the FSDP job, on
the same .bin/.idx data.

Every parallel size the recipe has is overridden (the llama3_8b recipe defaults context parallelism to 2, which
would silently halve the data-parallel size), and the layout is checked here, before SLURM is asked for nodes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from launch.fit import check_global_batch
from slurm.errors import SubmitError
from slurm.target import Target
from training.config import JobConfig
from training.models.args import ModelArgs
from training.models.families import family_named
from training.parallel.dims import DATA_PARALLEL_ONLY, ParallelDims
from training.signals import EXIT_STATUS_FILE

# NeMo 2's Llama recipe builds the architecture we call "llama" (RMSNorm, SwiGLU, RoPE, GQA); the shape fields
# are overridden. Megatron-core has no parallel attention/MLP block, so the NeoX flavor has no faithful recipe.
NEMO_RECIPE = "llama3_8b"


def validation_split(fraction: float) -> str:
    """Megatron's train,validation,test weights in thousandths."""
    validation = round(fraction * 1000)
    return f"{1000 - validation},{validation},0"


def nemo_config(
    job: JobConfig,
    model: ModelArgs,
    target: Target,
    nodes: int,
    run_dir: Path,
    tokenizer_dir: str,
    layout: ParallelDims = DATA_PARALLEL_ONLY,
) -> dict[str, Any]:
    gpus = target.workers_per_node
    check_megatron_job(job, model, gpus * nodes, layout, "NeMo 2", family_named(model.flavor).megatron_gap)
    steps = job.train.max_steps
    optim = job.optim
    overrides: dict[str, Any] = {
        "model.config.num_layers": model.n_layers,
        "model.config.hidden_size": model.dim,
        "model.config.ffn_hidden_size": model.ffn_dim,
        "model.config.num_attention_heads": model.n_heads,
        "model.config.num_query_groups": model.kv_heads,
        "model.config.seq_length": job.data.seq_len,
        "model.config.rotary_base": model.rope_theta,
        "model.config.layernorm_epsilon": model.norm_eps,
        "model.config.share_embeddings_and_output_weights": model.tie_embeddings,
        # Set, NeMo builds exactly this vocabulary; unset, it pads the tokenizer's for TP (a model nobody declared).
        "model.config.vocab_size": model.vocab_size,
        "model.config.init_method_std": model.init_std,
        "trainer.num_nodes": nodes,
        "trainer.devices": gpus,
        "trainer.max_steps": steps,
        "trainer.log_every_n_steps": job.train.log_every,
        "trainer.val_check_interval": job.train.eval_every or steps,
        "trainer.limit_val_batches": job.train.eval_batches,
        "trainer.strategy.tensor_model_parallel_size": layout.tp,
        "trainer.strategy.pipeline_model_parallel_size": layout.pp,
        "trainer.strategy.context_parallel_size": layout.cp,
        "trainer.strategy.expert_model_parallel_size": layout.ep,
        # Sequence parallelism splits the TP group's activations; with TP 1 Megatron has nothing to split.
        "trainer.strategy.sequence_parallel": layout.tp > 1,
        **optimizer_overrides(job, "optim.config"),
        "optim.lr_scheduler.warmup_steps": optim.warmup_steps,
        "optim.lr_scheduler.max_steps": optim.decay_steps or steps,
        "optim.lr_scheduler.min_lr": optim.lr * optim.min_lr_ratio,
        # Lightning's ModelCheckpoint accepts one trigger: the recipe's 15-minute timer goes, our step count stays.
        "log.ckpt.every_n_train_steps": job.checkpoint.steps_between_saves() or steps,
        "log.ckpt.train_time_interval": None,
        "log.ckpt.save_top_k": job.checkpoint.keep_last,
    }
    return {
        "recipe": NEMO_RECIPE,
        "name": run_dir.name,
        "log_dir": str(run_dir / "nemo"),
        "num_nodes": nodes,
        "gpus_per_node": gpus,
        "seed": job.train.seed,
        "exit_status_file": str(run_dir / EXIT_STATUS_FILE),
        "overrides": overrides,
        "data": {
            "paths": megatron_blend(job),
            "seq_length": job.data.seq_len,
            "global_batch_size": job.data.global_batch_size,
            "micro_batch_size": job.data.micro_batch_size,
            "split": validation_split(job.data.validation_fraction),
            "seed": job.data.seed,
            "tokenizer": tokenizer_dir,
        },
    }


def megatron_blend(job: JobConfig) -> list[float | str]:
    """The job's data as Megatron's blend list, the syntax NeMo 2's and Megatron Bridge's `paths` and NxDT's
    `data_prefix` share (megatron-core's get_blend_from_list): [prefix] for one dataset, [w1, p1, w2, p2, ...]
    for a mixture. The weights go as written: megatron-core normalizes them as our loader does."""
    if job.data.datasets is None:
        return [job.data.first_prefix]
    return [item for weight, prefix in job.data.blend for item in (weight, prefix)]


def optimizer_overrides(job: JobConfig, prefix: str) -> dict[str, Any]:
    """Our AdamW settings as Megatron Core's OptimizerConfig fields (NeMo 2's optim.config, Megatron Bridge's
    optimizer), under `prefix`."""
    optim = job.optim
    return {
        f"{prefix}.lr": optim.lr,
        f"{prefix}.min_lr": optim.lr * optim.min_lr_ratio,
        f"{prefix}.weight_decay": optim.weight_decay,
        f"{prefix}.adam_beta1": optim.beta1,
        f"{prefix}.adam_beta2": optim.beta2,
        f"{prefix}.adam_eps": optim.eps,
        f"{prefix}.clip_grad": job.train.grad_clip or 0.0,
    }


def check_megatron_job(
    job: JobConfig, model: ModelArgs, workers: int, layout: ParallelDims, framework: str, gap: str | None
) -> None:
    """What both NeMo Framework paths (NeMo 2, Megatron Bridge) refuse before SLURM is asked for nodes: a model
    flavor the framework has no recipe for (`gap`, the caller's reason), and a layout Megatron would refuse."""
    if gap is not None:
        raise SubmitError(
            f"--backend nemo: model flavor {model.flavor!r} has no {framework} recipe ({gap}); "
            + (
                "train it with --backend fsdp or neuron"
                if family_named(model.flavor).neuron_gap is None
                else "train it with --backend fsdp"
            )
        )
    check_parallel(model, workers, layout, job)


def check_parallel(model: ModelArgs, workers: int, layout: ParallelDims, job: JobConfig) -> None:
    """Refuses a layout Megatron (or NxDT) would refuse at start-up, naming the option and the values."""
    for value, option in (
        (layout.tp, "--tensor-parallel"),
        (layout.pp, "--pipeline-parallel"),
        (layout.cp, "--context-parallel"),
        (layout.ep, "--expert-parallel"),
    ):
        if value < 1:
            raise SubmitError(f"{option}: {value} must be at least 1")
    tp, pp, cp = layout.tp, layout.pp, layout.cp
    if workers % layout.model_parallel:
        raise SubmitError(
            f"--tensor-parallel x --pipeline-parallel x --context-parallel: {tp} x {pp} x {cp} does not divide "
            f"{workers} workers"
        )
    if model.n_heads % tp:
        raise SubmitError(f"--tensor-parallel: {tp} does not divide model.n_heads ({model.n_heads})")
    if model.kv_heads % tp:
        raise SubmitError(f"--tensor-parallel: {tp} does not divide the key/value heads ({model.kv_heads})")
    if model.vocab_size % tp:
        # The declared vocabulary trains unpadded (launch.vocab): each TP rank holds an equal slice of it.
        raise SubmitError(f"--tensor-parallel: {tp} does not divide model.vocab_size ({model.vocab_size})")
    if model.n_layers % pp:
        raise SubmitError(f"--pipeline-parallel: {pp} does not divide model.n_layers ({model.n_layers})")
    if cp > 1 and job.data.seq_len % (2 * cp):
        # Megatron's context parallelism cuts each sequence into 2 x CP chunks (load-balanced causal attention).
        raise SubmitError(f"--context-parallel: data.seq_len {job.data.seq_len} is not a multiple of 2 x {cp}")
    if layout.ep != 1 and not model.is_moe:
        raise SubmitError(
            f"--expert-parallel: {layout.ep} needs a mixture-of-experts model; {model.flavor} has no experts"
        )
    if model.n_experts % layout.ep:
        raise SubmitError(f"--expert-parallel: {layout.ep} does not divide model.n_experts ({model.n_experts})")
    if workers % (pp * layout.ep):
        # Megatron's expert groups (expert tensor parallel 1) tile the workers of each pipeline stage.
        raise SubmitError(
            f"--pipeline-parallel x --expert-parallel: {pp} x {layout.ep} does not divide {workers} workers"
        )
    check_global_batch(job, layout.data_parallel(workers))
