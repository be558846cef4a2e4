"""Fine-tuning on the NeMo backend: the job config's finetune: section rendered for Megatron Bridge's own SFT and
PEFT recipes (llama3_8b_sft_config, llama3_8b_peft_config in megatron-bridge 0.6.0), read by
launch/jobs/bridge_pretrain.py, which runs them through Bridge's finetune() under the pretraining job's contract
(checkpoints saved to and resumed from the run directory, SIGUSR1 stop, requeue, exit status).

- init: a Hugging Face directory (config.json and *.safetensors), which Bridge loads itself as
  checkpoint.pretrained_checkpoint, or a Megatron Bridge run directory of ours (its checkpoints/). An FSDP run's
  checkpoint is not Megatron's: it is exported to Hugging Face first (docs/finetuning.md).
- LoRA: Bridge's CanonicalLoRA, which adapts q, k, v and gate, up separately as Hugging Face's PEFT does (Bridge's
  plain LoRA adapts the fused QKV and FC1 with one pair of matrices each): our target names map one to one.
- Data: the {"input","output"} JSONL that `llm-prepare --sft` writes beside the dataset (<dir>/bridge/), read by
  Bridge's GPTSFTDataset, loss on the output only, packed offline into one sequence per micro-batch with sequence
  boundaries (cu_seqlens) so no sample attends to another.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from slurm.errors import SubmitError
from training.config import JobConfig
from training.models.args import ModelArgs
from training.parallel.dims import ParallelDims

RECIPES = {"full": "llama3_8b_sft_config", "lora": "llama3_8b_peft_config"}
# Hugging Face's Llama linear names -> Megatron Bridge CanonicalLoRA's target names.
CANONICAL_LORA_TARGETS = {
    "q_proj": "linear_q",
    "k_proj": "linear_k",
    "v_proj": "linear_v",
    "o_proj": "linear_proj",
    "gate_proj": "linear_fc1_gate",
    "up_proj": "linear_fc1_up",
    "down_proj": "linear_fc2",
}
SFT_SPLITS = ("training.jsonl", "validation.jsonl")
# The shape fields a Hugging Face init must share with the job's model (Bridge would fail loading it on the nodes).
SHAPE_FIELDS = (
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "vocab_size",
)


def sft_dataset_root(data_prefix: str) -> Path:
    """Where `llm-prepare --sft` writes Bridge's JSONL: bridge/ beside the dataset's files."""
    return Path(data_prefix).parent / "bridge"


def check_sft_dataset(data_prefix: str) -> Path:
    root = sft_dataset_root(data_prefix)
    for name in SFT_SPLITS:
        path = root / name
        try:
            with path.open(encoding="utf-8") as rows:
                first = rows.readline()
        except OSError:
            raise SubmitError(
                f"--data-prefix: {data_prefix}: no {path} (a finetune job on --backend nemo reads Megatron Bridge's "
                "JSONL that llm-prepare --sft writes)"
            ) from None
        if not first.strip():
            raise SubmitError(f"--data-prefix: {data_prefix}: {path} is empty")
    return root


def _is_hf_dir(path: Path) -> bool:
    return (path / "config.json").is_file() and any(path.glob("*.safetensors"))


def _check_hf_shape(init: Path, rendered: dict[str, Any]) -> None:
    config_path = init / "config.json"
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError) as error:
        raise SubmitError(f"finetune.init: {config_path} is not a readable config.json ({error})") from None
    for field in SHAPE_FIELDS:
        theirs = config.get(field, rendered[field] if field == "num_key_value_heads" else None)
        if theirs != rendered[field]:
            raise SubmitError(
                f"finetune.init: {config_path} has {field} {theirs}, the job's model has {rendered[field]}; "
                "set model.hf_checkpoint to the same directory"
            )


def pretrained_checkpoint(init_from: str, hf_config: dict[str, Any]) -> str:
    """What Bridge initializes from: the HF directory itself, or a Bridge run's checkpoints/."""
    init = Path(init_from).resolve()
    if _is_hf_dir(init):
        _check_hf_shape(init, hf_config)
        return str(init)
    checkpoints = init / "checkpoints"
    if (init / "bridge-config.yaml").is_file() and (checkpoints / "latest_checkpointed_iteration.txt").is_file():
        return str(checkpoints)
    raise SubmitError(
        f"finetune.init: {init_from!r} is neither a Hugging Face directory (config.json and *.safetensors) nor "
        "a Megatron Bridge run directory with a committed checkpoint; export an FSDP run to Hugging Face first "
        "(llm-export)"
    )


def finetune_settings(
    job: JobConfig, model: ModelArgs, layout: ParallelDims, run_dir: Path, hf_config: dict[str, Any]
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(recipe, extra overrides, the config's finetune: block) for a job with a finetune: section."""
    section = job.finetune
    assert section is not None
    if job.data.micro_batch_size != 1:
        raise SubmitError(
            f"data.micro_batch_size: {job.data.micro_batch_size} must be 1 for a finetune job on --backend nemo "
            "(Megatron Bridge packs SFT samples into one sequence per micro-batch: raise data.seq_len instead)"
        )
    init_from = job.init_from
    assert init_from is not None  # JobConfig refuses a finetune: section with neither init nor model.hf_checkpoint
    overrides: dict[str, Any] = {"checkpoint.pretrained_checkpoint": pretrained_checkpoint(init_from, hf_config)}
    if layout.cp > 1:
        # Bridge's rule for SFT with CP > 1: a rank whose tokens are all masked must not divide by zero.
        overrides["model.calculate_per_token_loss"] = True
        overrides["ddp.average_in_collective"] = False
    lora = section.lora_settings
    block: dict[str, Any] = {
        "mode": section.mode,
        "dataset_root": str(check_sft_dataset(job.data.first_prefix)),
        "work_dir": str(run_dir / "sft-data"),  # packed sequences and index files: the dataset dir stays read-only
        "pad_seq_to_mult": 2 * layout.cp if layout.cp > 1 else 1,
        "lora": None
        if lora is None
        else {
            "target_modules": [CANONICAL_LORA_TARGETS[name] for name in lora.target_modules],
            "dim": lora.rank,
            "alpha": lora.alpha,
            "dropout": lora.dropout,
        },
    }
    return RECIPES[section.mode], overrides, block
