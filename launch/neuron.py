"""The NeuronX Distributed Training (NxDT) config: its NeMo-style YAML rendered from our job config, with the
tensor/pipeline parallelism of "Frugality meets Accuracy: Cost-efficient training of GPT NeoX and Pythia models with AWS Trainium" (https://aws.amazon.com/blogs/machine-learning/frugality-meets-accuracy-cost-efficient-training-of-gpt-neox-and-pythia-models-with-aws-trainium/) for the published shapes (Pythia 6.9B: TP 8; GPT-NeoX 20B: TP 8, PP 4; the neox family's descriptor holds them).
Megatron-source models read the same .bin/.idx (data_prefix) as the FSDP job.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from launch.nemo import check_parallel, validation_split
from launch.nxdt_contract import contract_problems
from slurm.errors import SubmitError
from slurm.netenv import NEURON_CC_FLAGS
from slurm.target import Target
from training.config import JobConfig
from training.models.args import ModelArgs
from training.models.families import family_named
from training.models.registry import MODEL_CONFIGS
from training.parallel.dims import ParallelDims

DEFAULT_NEURON_PARALLELISM = (8, 1)


# Seconds the Neuron runtime lets one execution run before failing it (NxDT exports the config's
# neuron_rt_exec_timeout as NEURON_RT_EXEC_TIMEOUT): how long a stuck collective holds the live ranks, and what
# launch/liveness.py's heartbeat bounds derive from.
DEFAULT_EXEC_TIMEOUT_S = 100
MIN_EXEC_TIMEOUT_S = 12  # the liveness bounds need room: a 3 s staleness bound beaten every second


def default_parallelism(model_name: str | None) -> tuple[int, int]:
    """(tensor, pipeline) parallel for a named shape: its family's published NxDT run, else the default."""
    if model_name is None or model_name not in MODEL_CONFIGS:
        return DEFAULT_NEURON_PARALLELISM
    family = family_named(MODEL_CONFIGS[model_name].flavor)
    return family.neuron_parallelism.get(model_name, DEFAULT_NEURON_PARALLELISM)


def _architecture(model: ModelArgs) -> dict[str, Any]:
    specific = family_named(model.flavor).neuron_architecture(model)
    return {
        "num_layers": model.n_layers,
        "hidden_size": model.dim,
        "ffn_hidden_size": model.ffn_dim,
        "num_attention_heads": model.n_heads,
        "init_method_std": model.init_std,
        "hidden_dropout": 0.0,
        "attention_dropout": 0.0,
        "ffn_dropout": 0.0,
        "layernorm_epsilon": model.norm_eps,
        "share_embeddings_and_output_weights": model.tie_embeddings,
        "position_embedding_type": "rope",
        "position_freq_base": model.rope_theta,  # NxDT's name for the RoPE base (default 10000)
        "make_vocab_size_divisible_by": 8,  # x TP: Megatron pads the table to a multiple of both
        "use_cpu_initialization": True,
        "activations_checkpoint_granularity": "selective",
        "fusions": {"softmax": True, "flash_attention": False},
        **specific,
    }


def nxdt_config(
    job: JobConfig,
    model: ModelArgs,
    target: Target,
    nodes: int,
    run_dir: Path,
    tokenizer_dir: str,
    tensor_parallel: int,
    pipeline_parallel: int,
    exec_timeout_s: int = DEFAULT_EXEC_TIMEOUT_S,
) -> dict[str, Any]:
    if target.neuron is None:
        raise SubmitError("--backend neuron: the spec has no cluster.neuron section")
    gap = family_named(model.flavor).neuron_gap
    if gap is not None:
        raise SubmitError(
            f"--backend neuron: model flavor {model.flavor!r} has no NxDT model ({gap}); train it with --backend fsdp"
        )
    workers = target.workers_per_node
    check_parallel(model, workers * nodes, ParallelDims(tp=tensor_parallel, pp=pipeline_parallel), job)
    steps = job.train.max_steps
    optim = job.optim
    if optim.decay_steps not in (None, steps):
        # NxDT's configure_optimizers replaces sched.max_steps with trainer.max_steps (lightning_modules/model/base.py).
        raise SubmitError(
            f"optim.decay_steps: {optim.decay_steps} differs from train.max_steps {steps}; NxDT decays the learning "
            "rate over trainer.max_steps"
        )
    name = run_dir.name
    config: dict[str, Any] = {
        "name": name,
        "model_source": "megatron",
        "seed": job.train.seed,
        "trainer": {
            "devices": workers,
            "num_nodes": nodes,
            "max_epochs": -1,
            "max_steps": steps,
            "log_every_n_steps": job.train.log_every,
            "val_check_interval": job.train.eval_every or steps,
            "check_val_every_n_epoch": None,
            "num_sanity_val_steps": 0,
            "limit_val_batches": job.train.eval_batches,
            "limit_test_batches": 1,
            "gradient_clip_val": job.train.grad_clip or 0.0,
        },
        "exp_manager": {
            "log_local_rank_0_only": True,
            "create_tensorboard_logger": True,
            "explicit_log_dir": str(run_dir / "nxdt"),
            "exp_dir": None,
            "name": name,
            "resume_if_exists": True,
            "resume_ignore_no_checkpoint": True,
            "create_checkpoint_callback": True,
            "checkpoint_callback_params": {
                "monitor": "step",
                "save_top_k": job.checkpoint.keep_last,
                "mode": "max",
                "save_last": False,
                "filename": f"{name}--{{step}}-{{consumed_samples}}",
                "model_parallel_size": tensor_parallel * pipeline_parallel,
                "every_n_train_steps": job.checkpoint.steps_between_saves() or steps,
            },
            "log_parameter_norm": True,
            "log_gradient_norm": True,
            "save_xser": True,
            "load_xser": True,
            "async_checkpointing": False,
            # Read directly by NxDT's training.py (no default): the resume itself comes from resume_if_exists.
            "resume_from_checkpoint": None,
        },
        "distributed_strategy": {
            "tensor_model_parallel_size": tensor_parallel,
            "pipeline_model_parallel_size": pipeline_parallel,
            "virtual_pipeline_model_parallel_size": 1,
            "zero1": True,
            "sequence_parallel": True,
        },
        "data": {
            "micro_batch_size": job.data.micro_batch_size,
            "global_batch_size": job.data.global_batch_size,
            # NxDT's megatron data module always takes the weighted form, one dataset included
            "data_prefix": [item for weight, prefix in job.data.blend for item in (weight, prefix)],
            "data_impl": "mmap",
            "splits_string": validation_split(job.data.validation_fraction),
            "seq_length": job.data.seq_len,
            "skip_warmup": True,
            "num_workers": 1,
            "dataloader_type": "single",
            "index_mapping_dir": str(run_dir / "index-mapping"),
            "reset_position_ids": False,
            "reset_attention_mask": False,
            "eod_mask_loss": False,
            "tokenizer": {
                "library": "huggingface",
                "type": tokenizer_dir,
                # MegatronDataModule._build_tokenizer reads all three directly: they must exist, null when unused.
                "model": None,
                "vocab_file": None,
                "merge_file": None,
            },
        },
        "model": {
            "encoder_seq_length": job.data.seq_len,
            "max_position_embeddings": model.max_seq_len,
            **_architecture(model),
            "optim": {
                "name": "adamw_fp32OptState",
                "lr": optim.lr,
                "weight_decay": optim.weight_decay,
                "capturable": True,
                "betas": [optim.beta1, optim.beta2],
                "sched": {
                    "name": "CosineAnnealing",
                    "warmup_steps": optim.warmup_steps,
                    "constant_steps": 0,
                    "min_lr": optim.lr * optim.min_lr_ratio,
                },
            },
        },
        # bf16 with stochastic rounding, as the Trainium NeoX/Pythia blog trained (matches XLA_USE_BF16 and NEURON_RT_STOCHASTIC_ROUNDING_EN).
        "precision": {"type": "bf16SR"},
        # NxDT appends these to $NEURON_CC_FLAGS (training_orchestrator.py): the job environment leaves it unset.
        "compiler_flags": NEURON_CC_FLAGS,
        "compiler_cache_url": target.neuron.compile_cache_dir,
        "aync_exec_max_inflight_requests": 5,  # NxDT's own spelling of the key
        "bucket_size_collectives": 1024,
        "neuron_rt_exec_timeout": exec_timeout_s,
        "neuron_experimental_compress_rg": False,
    }
    problems = contract_problems(config)
    if problems:
        # A key NxDT would miss or not know stops the job at start on Trainium: refuse it before submission.
        raise SubmitError(f"--backend neuron: the NxDT config breaks NxDT's recorded contract: {problems[0]}")
    return config
