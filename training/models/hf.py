"""Hugging Face naming: config.json <-> ModelArgs, and parameter names/layouts <-> ours.

Llama maps one to one. GPT-NeoX's fused query_key_value rows hold, per head, [q | k | v] in the concatenation
rotary layout; ours hold q and k in the zero-frequency layout (rope.py), so those rows are permuted per head.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from training.models.args import ROPE_TYPES, ModelArgs, ModelArgsError
from training.models.rope import zero_frequency_order

_LLAMA_LAYER = {
    "attention.wq.weight": "self_attn.q_proj.weight",
    "attention.wk.weight": "self_attn.k_proj.weight",
    "attention.wv.weight": "self_attn.v_proj.weight",
    "attention.wo.weight": "self_attn.o_proj.weight",
    "feed_forward.w1.weight": "mlp.gate_proj.weight",
    "feed_forward.w3.weight": "mlp.up_proj.weight",
    "feed_forward.w2.weight": "mlp.down_proj.weight",
    "attention_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
}
_LLAMA_TOP = {
    "tok_embeddings.weight": "model.embed_tokens.weight",
    "norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
_NEOX_TOP = {
    "tok_embeddings.weight": "gpt_neox.embed_in.weight",
    "norm.weight": "gpt_neox.final_layer_norm.weight",
    "norm.bias": "gpt_neox.final_layer_norm.bias",
    "output.weight": "embed_out.weight",
}
_LAYER_KEY = re.compile(r"^layers\.(\d+)\.(.+)$")


def hf_name(args: ModelArgs, name: str) -> str:
    """Our parameter name -> the HF checkpoint's name."""
    top = _LLAMA_TOP if args.flavor == "llama" else _NEOX_TOP
    if name in top:
        return top[name]
    match = _LAYER_KEY.match(name)
    if match is None:
        raise KeyError(f"parameter {name!r} has no Hugging Face name")
    index, rest = match.groups()
    if args.flavor == "llama":
        if rest not in _LLAMA_LAYER:
            raise KeyError(f"parameter {name!r} has no Hugging Face name")
        return f"model.layers.{index}.{_LLAMA_LAYER[rest]}"
    return f"gpt_neox.layers.{index}.{rest}"


def needs_row_permutation(args: ModelArgs, name: str) -> bool:
    return args.flavor == "neox" and args.rotary_dim < args.head_dim and ".attention.query_key_value." in name


def qkv_row_order(args: ModelArgs) -> Tensor:
    """Row permutation of one head's [q | k | v] block from HF layout to ours (v unchanged)."""
    head_dim = args.head_dim
    order = torch.tensor(zero_frequency_order(head_dim, args.rotary_dim))
    return torch.cat([order, order + head_dim, torch.arange(2 * head_dim, 3 * head_dim)])


def _permute_head_blocks(rows: Tensor, order: Tensor) -> Tensor:
    """rows: whole head blocks stacked along dim 0; apply `order` inside each block."""
    block = order.numel()
    shaped = rows.reshape(rows.shape[0] // block, block, *rows.shape[1:])
    return shaped[:, order].reshape(rows.shape)


def hf_rows_to_ours(args: ModelArgs, name: str, rows: Tensor) -> Tensor:
    if not needs_row_permutation(args, name):
        return rows
    return _permute_head_blocks(rows, qkv_row_order(args))


def our_rows_to_hf(args: ModelArgs, name: str, rows: Tensor) -> Tensor:
    if not needs_row_permutation(args, name):
        return rows
    return _permute_head_blocks(rows, torch.argsort(qkv_row_order(args)))


def to_hf_state_dict(args: ModelArgs, state: dict[str, Tensor]) -> dict[str, Tensor]:
    return {hf_name(args, name): our_rows_to_hf(args, name, tensor) for name, tensor in state.items()}


def from_hf_state_dict(args: ModelArgs, hf_state: dict[str, Tensor], names: list[str]) -> dict[str, Tensor]:
    return {name: hf_rows_to_ours(args, name, hf_state[hf_name(args, name)]) for name in names}


_LLAMA3_KEYS = {
    "rope_factor": "factor",
    "rope_low_freq_factor": "low_freq_factor",
    "rope_high_freq_factor": "high_freq_factor",
    "rope_original_max_seq_len": "original_max_position_embeddings",
}


def _rope_scaling(args: ModelArgs) -> dict[str, Any]:
    """The rope_scaling entry (transformers 4 form, which transformers 5 still reads) for a scaled model."""
    if args.rope_type == "default":
        return {}
    return {
        "rope_scaling": {"rope_type": args.rope_type, **{hf: getattr(args, ours) for ours, hf in _LLAMA3_KEYS.items()}}
    }


# Shape fields the planner reads from Qwen configs and the trainer builds, but that this export does not write yet.
_NOT_EXPORTED = ("attention_head_dim", "qk_norm", "qkv_bias")


def hf_config(args: ModelArgs, torch_dtype: str = "float32") -> dict[str, Any]:
    for field in _NOT_EXPORTED:
        value = getattr(args, field)
        if value not in (None, False):
            raise ModelArgsError(f"model.{field}: {value!r} has no LlamaForCausalLM export (Qwen-style shape)")
    common = {
        "hidden_size": args.dim,
        "intermediate_size": args.ffn_dim,
        "num_hidden_layers": args.n_layers,
        "num_attention_heads": args.n_heads,
        "vocab_size": args.vocab_size,
        "max_position_embeddings": args.max_seq_len,
        "tie_word_embeddings": args.tie_embeddings,
        "initializer_range": args.init_std,
        "torch_dtype": torch_dtype,
    }
    if args.flavor == "llama":
        return {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            **common,
            "num_key_value_heads": args.kv_heads,
            "rms_norm_eps": args.norm_eps,
            "rope_theta": args.rope_theta,
            **_rope_scaling(args),
            "hidden_act": "silu",
            "attention_bias": False,
            "mlp_bias": False,
        }
    return {
        "architectures": ["GPTNeoXForCausalLM"],
        "model_type": "gpt_neox",
        **common,
        "layer_norm_eps": args.norm_eps,
        "rotary_pct": args.rotary_pct,
        "rotary_emb_base": args.rope_theta,
        **_rope_scaling(args),
        "use_parallel_residual": True,
        "hidden_act": "gelu",
        "attention_bias": True,
    }


def _require(config: dict[str, Any], key: str, check: Callable[[Any], bool], message: str) -> None:
    if key in config and not check(config[key]):
        raise ModelArgsError(f"config.json {key}: {config[key]!r} {message}")


def rope_from_hf_config(config: dict[str, Any], theta_key: str, fraction_key: str, fraction: float) -> dict[str, Any]:
    """Rotary settings as ModelArgs fields, from transformers 5's `rope_parameters` (rope_type, rope_theta,
    partial_rotary_factor and the scaling keys in one mapping) or from the older top-level keys (`theta_key`,
    `fraction_key`, `rope_scaling`). Scaling other than llama3 is refused: the model would silently differ."""
    if config.get("rope_parameters") is not None:
        where, params = "rope_parameters", config["rope_parameters"]
        if not isinstance(params, dict) or any(isinstance(v, dict) for v in params.values()):
            raise ModelArgsError(f"config.json rope_parameters: {params!r} is not supported (one flat mapping)")
        theta = params.get("rope_theta", 10000.0)
        fraction = params.get("partial_rotary_factor", fraction)
    else:
        where, params = "rope_scaling", config.get("rope_scaling") or {}
        if not isinstance(params, dict):
            raise ModelArgsError(f"config.json rope_scaling: {params!r} is not supported (a mapping or null)")
        theta = config.get(theta_key, 10000.0)
        fraction = config.get(fraction_key, fraction)
    rope_type = params.get("rope_type", params.get("type", "default"))
    if rope_type not in ROPE_TYPES:
        raise ModelArgsError(
            f"config.json {where}.rope_type: {rope_type!r} is not supported ({' or '.join(ROPE_TYPES)})"
        )
    fields: dict[str, Any] = {"rope_theta": float(theta), "rotary_pct": float(fraction), "rope_type": rope_type}
    if rope_type == "llama3":
        for ours, theirs in _LLAMA3_KEYS.items():
            if theirs not in params:
                raise ModelArgsError(f"config.json {where}.{theirs}: is required for rope_type 'llama3'")
            fields[ours] = params[theirs]
    return fields


def args_from_hf_config(config: dict[str, Any]) -> ModelArgs:
    """ModelArgs for an HF LlamaForCausalLM / GPTNeoXForCausalLM config.json; rejects what we do not implement."""
    model_type = config.get("model_type")
    try:
        shape = {
            "dim": config["hidden_size"],
            "ffn_dim": config["intermediate_size"],
            "n_layers": config["num_hidden_layers"],
            "n_heads": config["num_attention_heads"],
            "vocab_size": config["vocab_size"],
        }
    except KeyError as missing:
        raise ModelArgsError(f"config.json {missing.args[0]}: is required but missing") from None
    max_seq_len = config.get("max_position_embeddings", 2048)
    tie = bool(config.get("tie_word_embeddings", False))
    if model_type == "llama":
        rope = rope_from_hf_config(config, "rope_theta", "partial_rotary_factor", 1.0)
        _require(config, "hidden_act", lambda v: v == "silu", "is not supported (silu only)")
        _require(config, "attention_bias", lambda v: not v, "is not supported (no attention biases)")
        _require(config, "mlp_bias", lambda v: not v, "is not supported (no MLP biases)")
        return ModelArgs(
            flavor="llama", **shape, n_kv_heads=config.get("num_key_value_heads"),
            norm_eps=config.get("rms_norm_eps", 1e-6), max_seq_len=max_seq_len, tie_embeddings=tie, **rope,
        )  # fmt: skip
    if model_type == "gpt_neox":
        _require(config, "use_parallel_residual", bool, "is not supported (parallel residual only)")
        _require(config, "hidden_act", lambda v: v == "gelu", "is not supported (gelu only)")
        rope = rope_from_hf_config(config, "rotary_emb_base", "rotary_pct", 0.25)
        return ModelArgs(
            flavor="neox", **shape, norm_eps=config.get("layer_norm_eps", 1e-5), max_seq_len=max_seq_len,
            tie_embeddings=tie, **rope,
        )  # fmt: skip
    raise ModelArgsError(f"config.json model_type: {model_type!r} is not supported (llama or gpt_neox)")
