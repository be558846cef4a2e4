"""The NeMo 2 job config: a recipe (Llama shape) plus dotted overrides rendered from our job config, read inside
the container by training/jobs/nemo_pretrain.py. Same shape, sequence, batch and LR schedule as the FSDP job, on
the same .bin/.idx data.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from training.config import JobConfig
from training.launch.errors import SubmitError
from training.launch.target import Target
from training.models.args import ModelArgs

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
    tensor_parallel: int = 1,
    pipeline_parallel: int = 1,
) -> dict[str, Any]:
    if model.flavor != "llama":
        raise SubmitError(
            f"--backend nemo: model flavor {model.flavor!r} has no NeMo 2 recipe (Megatron has no parallel "
            "attention/MLP block); train it with --backend fsdp or neuron"
        )
    gpus = target.workers_per_node
    check_parallel(model, gpus * nodes, tensor_parallel, pipeline_parallel, job)
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
        "model.config.init_method_std": model.init_std,
        "trainer.num_nodes": nodes,
        "trainer.devices": gpus,
        "trainer.max_steps": steps,
        "trainer.log_every_n_steps": job.train.log_every,
        "trainer.val_check_interval": job.train.eval_every or steps,
        "trainer.limit_val_batches": job.train.eval_batches,
        "trainer.strategy.tensor_model_parallel_size": tensor_parallel,
        "trainer.strategy.pipeline_model_parallel_size": pipeline_parallel,
        "optim.config.lr": optim.lr,
        "optim.config.min_lr": optim.lr * optim.min_lr_ratio,
        "optim.config.weight_decay": optim.weight_decay,
        "optim.config.adam_beta1": optim.beta1,
        "optim.config.adam_beta2": optim.beta2,
        "optim.config.adam_eps": optim.eps,
        "optim.config.clip_grad": job.train.grad_clip or 0.0,
        "optim.lr_scheduler.warmup_steps": optim.warmup_steps,
        "optim.lr_scheduler.max_steps": optim.decay_steps or steps,
        "optim.lr_scheduler.min_lr": optim.lr * optim.min_lr_ratio,
        "log.ckpt.every_n_train_steps": job.checkpoint.every or steps,
        "log.ckpt.save_top_k": job.checkpoint.keep_last,
    }
    return {
        "recipe": NEMO_RECIPE,
        "name": run_dir.name,
        "log_dir": str(run_dir / "nemo"),
        "num_nodes": nodes,
        "gpus_per_node": gpus,
        "seed": job.train.seed,
        "overrides": overrides,
        "data": {
            "paths": [job.data.prefix],
            "seq_length": job.data.seq_len,
            "global_batch_size": job.data.global_batch_size,
            "micro_batch_size": job.data.micro_batch_size,
            "split": validation_split(job.data.validation_fraction),
            "seed": job.data.seed,
            "tokenizer": tokenizer_dir,
        },
    }


def check_parallel(model: ModelArgs, workers: int, tp: int, pp: int, job: JobConfig) -> None:
    if tp < 1 or pp < 1:
        raise SubmitError(f"--tensor-parallel/--pipeline-parallel: {tp}/{pp} must be at least 1")
    if workers % (tp * pp):
        raise SubmitError(f"--tensor-parallel x --pipeline-parallel: {tp} x {pp} does not divide {workers} workers")
    if model.n_heads % tp:
        raise SubmitError(f"--tensor-parallel: {tp} does not divide model.n_heads ({model.n_heads})")
    if model.n_layers % pp:
        raise SubmitError(f"--pipeline-parallel: {pp} does not divide model.n_layers ({model.n_layers})")
    data_parallel = workers // (tp * pp)
    if job.data.global_batch_size % (job.data.micro_batch_size * data_parallel):
        raise SubmitError(
            f"data.global_batch_size: {job.data.global_batch_size} is not a multiple of micro_batch_size x "
            f"data-parallel size ({job.data.micro_batch_size} x {data_parallel})"
        )
