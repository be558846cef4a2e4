"""The Qwen3 family's Hugging Face adapter: Qwen3ForCausalLM (dense) and Qwen3MoeForCausalLM.

Names are Llama's plus the per-head q/k norms; a Qwen3-MoE layer's router is `mlp.gate` and its experts are one
tensor per expert on the Hub (`mlp.experts.{j}.gate_proj.weight`), stacked into our [n_experts, out, in] weights.
Only what both classes hold is exported: no shared experts, softmax routing, no routed scaling, no router bias.
"""

from __future__ import annotations

from typing import Any

from training.models.args import ModelArgs
from training.models.hf import HFAdapter, refuse_unexported, require, rope_from_hf_config, rope_scaling

_MOE_ONLY_IN_OTHER_FAMILIES = ("n_shared_experts", "router_bias_update_rate")


def _config(args: ModelArgs) -> dict[str, Any]:
    common = {
        "architectures": ["Qwen3MoeForCausalLM" if args.is_moe else "Qwen3ForCausalLM"],
        "model_type": "qwen3_moe" if args.is_moe else "qwen3",
        "num_key_value_heads": args.kv_heads,
        "head_dim": args.head_dim,
        "rms_norm_eps": args.norm_eps,
        "rope_theta": args.rope_theta,
        **rope_scaling(args),
        "hidden_act": "silu",
        "attention_bias": False,
        "use_sliding_window": False,
    }
    if not args.is_moe:
        return common
    target = "Qwen3MoeForCausalLM"
    refuse_unexported(args, _MOE_ONLY_IN_OTHER_FAMILIES, 0, target)
    refuse_unexported(args, ("router_score",), "softmax", target)
    refuse_unexported(args, ("route_scale",), 1.0, target)
    return {
        **common,
        "num_experts": args.n_experts,
        "num_experts_per_tok": args.experts_per_token,
        "moe_intermediate_size": args.expert_width,
        "norm_topk_prob": args.norm_topk_prob,
        "router_aux_loss_coef": args.router_aux_loss_coef,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
    }


def _args_from_config(config: dict[str, Any], shape: dict[str, Any]) -> ModelArgs:
    rope = rope_from_hf_config(config, "rope_theta", "partial_rotary_factor", 1.0)
    require(config, "hidden_act", lambda v: v == "silu", "is not supported (silu only)")
    require(config, "attention_bias", lambda v: not v, "is not supported (no attention biases)")
    require(config, "use_sliding_window", lambda v: not v, "is not supported (full causal attention only)")
    head_dim = config.get("head_dim")
    if head_dim is not None and head_dim * shape["n_heads"] == shape["dim"]:
        head_dim = None  # hidden_size / heads spelled out
    moe: dict[str, Any] = {}
    if config.get("model_type") == "qwen3_moe":
        require(config, "decoder_sparse_step", lambda v: v == 1, "is not supported (every layer MoE)")
        require(config, "mlp_only_layers", lambda v: not v, "is not supported (every layer MoE)")
        moe = {
            "n_experts": config.get("num_experts", 128),
            "experts_per_token": config.get("num_experts_per_tok", 8),
            "expert_ffn_dim": config.get("moe_intermediate_size", 768),
            "norm_topk_prob": bool(config.get("norm_topk_prob", False)),
            "router_aux_loss_coef": float(config.get("router_aux_loss_coef", 0.001)),
        }
    return ModelArgs(
        flavor="qwen3", **shape, n_kv_heads=config.get("num_key_value_heads"), attention_head_dim=head_dim,
        qk_norm=True, norm_eps=config.get("rms_norm_eps", 1e-6), **rope, **moe,
    )  # fmt: skip


QWEN3_HF = HFAdapter(
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
        "attention.q_norm.weight": "self_attn.q_norm.weight",
        "attention.k_norm.weight": "self_attn.k_norm.weight",
        "feed_forward.w1.weight": "mlp.gate_proj.weight",
        "feed_forward.w3.weight": "mlp.up_proj.weight",
        "feed_forward.w2.weight": "mlp.down_proj.weight",
        "feed_forward.router.gate.weight": "mlp.gate.weight",
        "attention_norm.weight": "input_layernorm.weight",
        "ffn_norm.weight": "post_attention_layernorm.weight",
    },
    experts={
        "feed_forward.experts.w1": "mlp.experts.{expert}.gate_proj.weight",
        "feed_forward.experts.w3": "mlp.experts.{expert}.up_proj.weight",
        "feed_forward.experts.w2": "mlp.experts.{expert}.down_proj.weight",
    },
    config=_config,
    args_from_config=_args_from_config,
)
