"""transformers' own model classes as the oracle for a family's block and HF adapter: the same weights give the
same logits (fp32, CPU) whichever way they travel, HF -> ours through our import (training/checkpoint/hf_load.py)
or ours -> HF through our export (to_hf_state_dict, hf_config), loaded by transformers' from_pretrained."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file
from torch import nn
from transformers import AutoConfig, AutoModelForCausalLM

from training.checkpoint.hf_load import load_hf_weights
from training.models.args import ModelArgs
from training.models.hf import hf_config, to_hf_state_dict
from training.models.loss import IGNORE_INDEX
from training.models.transformer import Transformer, build_model

ATOL = 1e-5


def token_ids(args: ModelArgs, seed: int = 0, batch: int = 2, seq: int = 24) -> torch.Tensor:
    return torch.randint(0, args.vocab_size, (batch, seq), generator=torch.Generator().manual_seed(seed))


def random_hf_model(args: ModelArgs, seed: int = 0) -> nn.Module:
    """transformers' class for our exported config.json, every parameter redrawn (norm gains too, so that a
    norm we dropped or misplaced shows in the logits)."""
    config = AutoConfig.for_model(**hf_config(args))
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(torch.randn_like(param) * 0.1 + (1.0 if param.ndim == 1 else 0.0))
    return model.eval()


def ours_from_hf(args: ModelArgs, hf_model: nn.Module, directory: Path) -> Transformer:
    """Our model loaded from transformers' own save_pretrained output, through the fine-tuning import."""
    hf_model.save_pretrained(directory)
    model = build_model(args, device="meta").to_empty(device="cpu")
    model.init_weights(seed=1)  # buffers and anything the import forgets get values; the import must overwrite
    load_hf_weights(model, args, directory)
    return model.eval()


def hf_from_ours(args: ModelArgs, model: Transformer, directory: Path) -> nn.Module:
    """transformers' from_pretrained on our export (the names and config.json training/export.py writes)."""
    directory.mkdir(parents=True, exist_ok=True)
    tensors = {name: t.detach().contiguous() for name, t in to_hf_state_dict(args, model.state_dict()).items()}
    save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})
    (directory / "config.json").write_text(json.dumps(hf_config(args)), encoding="utf-8")
    return AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32).eval()


def random_ours(args: ModelArgs, seed: int = 0) -> Transformer:
    model = build_model(args, device="cpu")
    model.init_weights(seed=seed)
    with torch.no_grad():  # norm gains away from 1, as trained ones are
        for name, param in model.named_parameters():
            if param.ndim == 1:
                param.add_(torch.randn(param.shape, generator=torch.Generator().manual_seed(len(name))) * 0.1)
    return model.eval()


@torch.no_grad()
def max_logit_difference(ours: Transformer, hf_model: nn.Module, ids: torch.Tensor) -> float:
    return float((ours(ids) - hf_model(input_ids=ids).logits).abs().max())


def shifted_labels(ids: torch.Tensor) -> torch.Tensor:
    """Next-token labels for every position of ids, the last ignored: the tokens transformers' loss trains."""
    return torch.cat([ids[:, 1:], torch.full_like(ids[:, :1], IGNORE_INDEX)], dim=1)
