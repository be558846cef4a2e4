"""The GPT-NeoX family's Hugging Face adapter (GPTNeoXForCausalLM).

Block parameter names are HF's own. HF's fused query_key_value rows hold, per head, [q | k | v] in the
concatenation rotary layout; ours hold q and k in the zero-frequency layout (rope.py), so with partial rotary
those rows are permuted per head.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from training.models.args import ModelArgs
from training.models.hf import HFAdapter, require, rope_from_hf_config, rope_scaling
from training.models.rope import zero_frequency_order


def qkv_row_order(args: ModelArgs) -> Tensor:
    """Row permutation of one head's [q | k | v] block from HF layout to ours (v unchanged)."""
    head_dim = args.head_dim
    order = torch.tensor(zero_frequency_order(head_dim, args.rotary_dim))
    return torch.cat([order, order + head_dim, torch.arange(2 * head_dim, 3 * head_dim)])


def _row_order(args: ModelArgs, name: str) -> Tensor | None:
    if args.rotary_dim < args.head_dim and ".attention.query_key_value." in name:
        return qkv_row_order(args)
    return None


def _config(args: ModelArgs) -> dict[str, Any]:
    return {
        "architectures": ["GPTNeoXForCausalLM"],
        "model_type": "gpt_neox",
        "layer_norm_eps": args.norm_eps,
        "rotary_pct": args.rotary_pct,
        "rotary_emb_base": args.rope_theta,
        **rope_scaling(args),
        "use_parallel_residual": True,
        "hidden_act": "gelu",
        "attention_bias": True,
    }


def _args_from_config(config: dict[str, Any], shape: dict[str, Any]) -> ModelArgs:
    require(config, "use_parallel_residual", bool, "is not supported (parallel residual only)")
    require(config, "hidden_act", lambda v: v == "gelu", "is not supported (gelu only)")
    rope = rope_from_hf_config(config, "rotary_emb_base", "rotary_pct", 0.25)
    return ModelArgs(flavor="neox", **shape, norm_eps=config.get("layer_norm_eps", 1e-5), **rope)


NEOX_HF = HFAdapter(
    top={
        "tok_embeddings.weight": "gpt_neox.embed_in.weight",
        "norm.weight": "gpt_neox.final_layer_norm.weight",
        "norm.bias": "gpt_neox.final_layer_norm.bias",
        "output.weight": "embed_out.weight",
    },
    layer_prefix="gpt_neox.layers",
    layer=None,
    config=_config,
    args_from_config=_args_from_config,
    row_order=_row_order,
)
