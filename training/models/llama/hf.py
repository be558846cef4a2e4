"""The Llama family's Hugging Face adapter (LlamaForCausalLM): names map one to one, no row permutation."""

from __future__ import annotations

from typing import Any

from training.models.args import ModelArgs
from training.models.hf import HFAdapter, refuse_unexported, require, rope_from_hf_config, rope_scaling

# Shape fields the planner reads from Qwen configs and the trainer builds, but that LlamaForCausalLM cannot hold
# (the qwen3 family exports Qwen3's).
_NOT_EXPORTED = ("attention_head_dim", "qk_norm", "qkv_bias")


def _config(args: ModelArgs) -> dict[str, Any]:
    refuse_unexported(args, _NOT_EXPORTED, False, "LlamaForCausalLM", "Qwen-style shape")
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "num_key_value_heads": args.kv_heads,
        "rms_norm_eps": args.norm_eps,
        "rope_theta": args.rope_theta,
        **rope_scaling(args),
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
    }


def _args_from_config(config: dict[str, Any], shape: dict[str, Any]) -> ModelArgs:
    rope = rope_from_hf_config(config, "rope_theta", "partial_rotary_factor", 1.0)
    require(config, "hidden_act", lambda v: v == "silu", "is not supported (silu only)")
    require(config, "attention_bias", lambda v: not v, "is not supported (no attention biases)")
    require(config, "mlp_bias", lambda v: not v, "is not supported (no MLP biases)")
    return ModelArgs(
        flavor="llama", **shape, n_kv_heads=config.get("num_key_value_heads"),
        norm_eps=config.get("rms_norm_eps", 1e-6), **rope,
    )  # fmt: skip


LLAMA_HF = HFAdapter(
    top={
        "tok_embeddings.weight": "model.embed_tokens.weight",
        "norm.weight": "model.norm.weight",
        "output.weight": "lm_head.weight",
    },
    layer_prefix="model.layers",
    layer={
        "attention.wq.weight": "self_attn.q_proj.weight",
        "attention.wk.weight": "self_attn.k_proj.weight",
        "attention.wv.weight": "self_attn.v_proj.weight",
        "attention.wo.weight": "self_attn.o_proj.weight",
        "feed_forward.w1.weight": "mlp.gate_proj.weight",
        "feed_forward.w3.weight": "mlp.up_proj.weight",
        "feed_forward.w2.weight": "mlp.down_proj.weight",
        "attention_norm.weight": "input_layernorm.weight",
        "ffn_norm.weight": "post_attention_layernorm.weight",
    },
    config=_config,
    args_from_config=_args_from_config,
)
