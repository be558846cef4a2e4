"""The Megatron Bridge job config (NeMo Framework 26.08's LLM path), read inside the container by
launch/jobs/bridge_pretrain.py: a recipe function of Megatron Bridge, dotted overrides of its ConfigContainer,
our dataset and tokenizer. Same shape, sequence, batch and LR schedule as the FSDP job, on the same .bin/.idx data.

The Llama recipes take their model from the Hugging Face Hub (`AutoBridge.from_hf_pretrained("meta-llama/...")`),
which the cluster's VPC cannot reach and which would carry Meta's shape, not ours. So the job ships a Hugging Face
config.json of our shape under the recipe's model id in the run directory (`hf_model_root/<hf_model_id>/`); the
entry point builds the recipe from that directory, and Megatron Bridge's own Llama bridge turns it into the model
provider. The same directory is what the Hugging Face export (docs/jobs.md) names.

Every parallel size is set (llama3_8b's recipe defaults context parallelism to 2) and the layout is checked here,
before SLURM is asked for nodes (launch.nemo.check_megatron_job, the same rules as the 25.07 path).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from launch.bridge_finetune import finetune_settings
from launch.nemo import check_megatron_job, megatron_blend, optimizer_overrides, validation_split
from slurm.errors import SubmitError
from slurm.target import Target
from training.config import JobConfig
from training.models.args import ModelArgs
from training.models.families import family_named
from training.models.family import BridgeRecipe
from training.parallel.dims import ParallelDims
from training.signals import EXIT_STATUS_FILE

# The recipe of the llama family (training/models/llama/family.py); each family names its own (ModelFamily.
# bridge_recipe), and the bridge_contract tests fail if a new Bridge version asks AutoBridge for another model id.
BRIDGE_RECIPE = "llama3_8b_pretrain_config"
BRIDGE_RECIPE_MODULE = "megatron.bridge.recipes.llama"
RECIPE_HF_MODEL_ID = "meta-llama/Meta-Llama-3-8B"
# The job config's float8.recipe as Megatron Bridge's mixed-precision presets (megatron/bridge/training/
# mixed_precision.py, 0.6.0): TransformerEngine's per-tensor current scaling is torchao's dynamic tensorwise;
# MXFP8 is the same format on both. torchao's rowwise has no TransformerEngine preset (launch/float8.py refuses it).
BRIDGE_FP8_PRESETS = {"tensorwise": "bf16_with_fp8_current_scaling_mixed", "mxfp8": "bf16_with_mxfp8_mixed"}
CONFIG_NAME = "bridge-config.yaml"
# Megatron Bridge's own Hugging Face export of a run's latest checkpoint, run in the NeMo container as
# `python -c CODE HF_CONFIG_DIR CHECKPOINTS OUT` (docs/jobs.md shows it; llm-eval's job runs it for a Bridge run). The
# bridge is made from the run's rendered HF config alone: from_hf_pretrained would look for HF weights there.
BRIDGE_EXPORT_CODE = (
    "import sys; from transformers import AutoConfig; from megatron.bridge import AutoBridge; "
    "AutoBridge.from_hf_config(AutoConfig.from_pretrained(sys.argv[1])).export_ckpt(sys.argv[2], sys.argv[3])"
)


def bridge_hf_config(model: ModelArgs) -> dict[str, Any]:
    """The model family's Hugging Face config (training/models/<family>/hf.py, what our HF export writes) with the
    rotary settings as transformers 5, the container's, writes them (`rope_parameters`) and the head size spelled out
    (the family's: Qwen3's heads may be wider than dim / n_heads)."""
    # The adapters live beside the state-dict mapping, which needs torch: imported only when a Bridge job renders.
    from training.models.hf import hf_config, rope_parameters

    config = hf_config(model, torch_dtype="bfloat16")
    for older in ("rope_theta", "rope_scaling"):
        config.pop(older, None)
    return {**config, "head_dim": model.head_dim, "rope_parameters": rope_parameters(model)}


def bridge_recipe(model: ModelArgs) -> BridgeRecipe | None:
    """The Megatron Bridge recipe of the model's family and shape; None: Bridge has none (bridge_gap_of says why)."""
    family = family_named(model.flavor)
    return None if family.bridge_recipe is None else family.bridge_recipe(model)


def bridge_gap_of(model: ModelArgs) -> str | None:
    family = family_named(model.flavor)
    if family.bridge_recipe is not None:
        return None
    return family.bridge_gap or family.megatron_gap or "no Megatron Bridge recipe is named for the family"


def bridge_config(
    job: JobConfig,
    model: ModelArgs,
    target: Target,
    nodes: int,
    run_dir: Path,
    tokenizer_dir: str,
    layout: ParallelDims | None = None,
) -> dict[str, Any]:
    layout = layout or ParallelDims()
    gpus = target.workers_per_node
    check_megatron_job(job, model, gpus * nodes, layout, "Megatron Bridge", bridge_gap_of(model))
    family_recipe = bridge_recipe(model)
    assert family_recipe is not None  # check_megatron_job refused a family without one
    steps = job.train.max_steps
    optim, checkpoint = job.optim, job.checkpoint
    checkpoints = str(run_dir / "checkpoints")
    overrides: dict[str, Any] = {
        "model.seq_length": job.data.seq_len,
        "model.tensor_model_parallel_size": layout.tp,
        "model.pipeline_model_parallel_size": layout.pp,
        "model.context_parallel_size": layout.cp,
        "model.expert_model_parallel_size": layout.ep,
        # Sequence parallelism splits the TP group's activations; with TP 1 Megatron has nothing to split.
        "model.sequence_parallel": layout.tp > 1,
        "model.init_method_std": model.init_std,
        "train.train_iters": steps,
        "train.global_batch_size": job.data.global_batch_size,
        "train.micro_batch_size": job.data.micro_batch_size,
        # The time-limit warning stops training through Megatron Bridge's own signal handler (the entry point
        # sets train.exit_signal to SIGUSR1); no other exit condition, so an exit before train_iters is that stop.
        "train.exit_signal_handler": True,
        "train.exit_duration_in_mins": None,
        "train.exit_interval": None,
        "validation.eval_interval": job.train.eval_every or steps,
        "validation.eval_iters": job.train.eval_batches,
        **optimizer_overrides(job, "optimizer"),
        "scheduler.lr_warmup_iters": optim.warmup_steps,
        "scheduler.lr_decay_iters": optim.decay_steps or steps,
        # Saved and resumed from the same directory: a requeued job loads the latest checkpoint there.
        "checkpoint.save": checkpoints,
        "checkpoint.load": checkpoints,
        "checkpoint.save_interval": checkpoint.steps_between_saves() or steps,
        "checkpoint.most_recent_k": checkpoint.keep_last,
        # Periodic saves write in the background (Megatron Core's persistent worker); a stop's save is still
        # waited for before the step exits, which is what --signal-lead must cover (docs/jobs.md).
        "checkpoint.async_save": checkpoint.async_save,
        "logger.log_interval": job.train.log_every,
        "logger.tensorboard_dir": str(run_dir / "tensorboard"),
        "rng.seed": job.train.seed,
    }
    if model.is_moe:
        # Experts split over the expert-parallel group only (no tensor parallelism inside an expert), tokens
        # exchanged by Megatron Core's all-to-all dispatcher (DeepEP/HybridEP need their own kernels).
        overrides["model.expert_tensor_parallel_size"] = 1
        overrides["model.moe_token_dispatcher_type"] = "alltoall"
        overrides["model.moe_flex_dispatcher_backend"] = None
    if job.float8.enabled:  # launch/float8.py refused what has no preset
        overrides["mixed_precision"] = BRIDGE_FP8_PRESETS[job.float8.recipe]
    recipe = family_recipe.function
    config: dict[str, Any] = {}
    if job.finetune is not None and model.flavor != "llama":
        raise SubmitError(
            f"finetune: model flavor {model.flavor!r} has no Megatron Bridge SFT recipe here (llama only)"
        )
    if job.finetune is not None:  # Bridge's own SFT/PEFT recipe, the same contract (launch/bridge_finetune.py)
        recipe, extra, config["finetune"] = finetune_settings(job, model, layout, run_dir, bridge_hf_config(model))
        overrides.update(extra)
    return {
        **config,
        "framework": target.nemo_framework,
        "recipe_module": family_recipe.module,
        "recipe": recipe,
        "hf_model_id": family_recipe.hf_model_id,
        "hf_model_root": str(run_dir / "hf"),
        "name": run_dir.name,
        "num_nodes": nodes,
        "gpus_per_node": gpus,
        "exit_status_file": str(run_dir / EXIT_STATUS_FILE),
        "overrides": overrides,
        "data": {
            "paths": megatron_blend(job),
            "split": validation_split(job.data.validation_fraction),
            "seq_length": job.data.seq_len,
            "seed": job.data.seed,
            "tokenizer": tokenizer_dir,
        },
    }


def hf_config_path(config: dict[str, Any]) -> Path:
    """Where the rendered Hugging Face config.json of the model goes (the recipe's model id under hf_model_root)."""
    return Path(config["hf_model_root"]) / config["hf_model_id"] / "config.json"
