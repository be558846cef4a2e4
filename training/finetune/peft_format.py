"""LoRA adapters in PEFT's format, and their merge into a full HF checkpoint.

PEFT saves a LoRA adapter as adapter_config.json (peft_type LORA, r, lora_alpha, lora_dropout, target_modules) and
adapter_model.safetensors, whose keys are the HF module paths under `base_model.model.` with `.lora_A.weight`
[rank, in] and `.lora_B.weight` [out, rank]; `PeftModel.from_pretrained(hf_model, directory)` loads that onto the
base model. Ours hold the same matrices as lora_a and lora_b (training/finetune/lora.py).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from torch import Tensor, nn
from torch.distributed.tensor import DTensor

from training.finetune.config import LoraSection
from training.finetune.lora import LoRALinear, is_adapter, lora_modules
from training.models.args import ModelArgs
from training.models.hf import to_hf_state_dict
from training.parallel.parallelize import plain_name

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
PEFT_PREFIX = "base_model.model."


def _full(tensor: Tensor) -> Tensor:
    """The whole tensor on CPU; a collective for a DTensor shard (every rank calls it)."""
    whole = tensor.full_tensor() if isinstance(tensor, DTensor) else tensor
    return whole.detach().float().cpu().contiguous()


def hf_module_name(args: ModelArgs, our_module: str) -> str:
    """layers.3.attention.wq -> model.layers.3.self_attn.q_proj"""
    return next(iter(to_hf_state_dict(args, {f"{our_module}.weight": torch.empty(0)}))).removesuffix(".weight")


def adapter_tensors(model: nn.Module, args: ModelArgs) -> dict[str, Tensor]:
    """The adapters under PEFT's names, whole and fp32 (every rank calls it: gathering shards is collective)."""
    tensors = {}
    for raw_name, module in lora_modules(model):
        key = PEFT_PREFIX + hf_module_name(args, plain_name(raw_name))
        tensors[f"{key}.lora_A.weight"] = _full(module.lora_a)
        tensors[f"{key}.lora_B.weight"] = _full(module.lora_b)
    return tensors


def adapter_config(section: LoraSection, base_model: str | None) -> dict[str, Any]:
    return {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": base_model,
        "r": section.rank,
        "lora_alpha": section.alpha,
        "lora_dropout": section.dropout,
        "target_modules": sorted(section.target_modules),
        "bias": "none",
        "fan_in_fan_out": False,
        "use_rslora": False,
        "use_dora": False,
        "init_lora_weights": True,
        "modules_to_save": None,
        "inference_mode": True,
    }


def write_adapter(tensors: dict[str, Tensor], section: LoraSection, base_model: str | None, output: Path) -> Path:
    """OUTPUT/adapter_config.json and adapter_model.safetensors, replacing an older adapter only once complete."""
    staging = output.with_name(output.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    save_file(tensors, str(staging / ADAPTER_WEIGHTS), metadata={"format": "pt"})
    config = adapter_config(section, base_model)
    (staging / ADAPTER_CONFIG).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    if output.exists():
        shutil.rmtree(output)
    os.replace(staging, output)
    return output


def base_state_dict(model: nn.Module) -> dict[str, Tensor]:
    """Our names -> the frozen base weights, adapters left out (a plain model)."""
    return {name: tensor for name, tensor in model.state_dict().items() if not is_adapter(name)}


@torch.no_grad()
def merged_state_dict(model: nn.Module) -> dict[str, Tensor]:
    """Our names -> weights with every adapter folded in (W + alpha/rank B A, fp32), adapters left out."""
    state = {name: tensor.float() for name, tensor in base_state_dict(model).items()}
    for name, module in lora_modules(model):
        assert isinstance(module, LoRALinear)
        state[f"{plain_name(name)}.weight"] = module.merged_weight()
    return state
