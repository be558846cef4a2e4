"""The Mixtral family's Hugging Face adapter (MixtralForCausalLM), in the Hub's checkpoint names: the router is
`block_sparse_moe.gate` and expert j's w1 (gate), w3 (up), w2 (down) are `block_sparse_moe.experts.{j}.w*.weight`
(transformers 5 renames them to `mlp.*` when it loads, and back when it saves).

Mistral's sliding-window attention is refused on import: every Mixtral release sets `sliding_window` null, and a
window would make our full causal attention silently differ. Shapes MixtralForCausalLM cannot hold (shared experts,
sigmoid routing, routed scaling, an aux-free router bias, an expert width other than intermediate_size, top-k
weights not renormalised: the DeepSeek-V3-style shapes) have no export.
"""

from __future__ import annotations

from typing import Any

from training.models.args import ModelArgs, ModelArgsError
from training.models.hf import HFAdapter, refuse_unexported, require, rope_from_hf_config, rope_scaling

_TARGET = "MixtralForCausalLM"


def _config(args: ModelArgs) -> dict[str, Any]:
    refuse_unexported(args, ("n_shared_experts", "router_bias_update_rate"), 0, _TARGET)
    refuse_unexported(args, ("router_score",), "softmax", _TARGET)
    refuse_unexported(args, ("route_scale",), 1.0, _TARGET)
    refuse_unexported(args, ("norm_topk_prob",), True, _TARGET, "Mixtral always renormalises the top-k weights")
    if args.expert_width != args.ffn_dim:
        raise ModelArgsError(
            f"model.expert_ffn_dim: {args.expert_ffn_dim!r} has no {_TARGET} export (its experts are ffn_dim wide)"
        )
    return {
        "architectures": [_TARGET],
        "model_type": "mixtral",
        "num_key_value_heads": args.kv_heads,
        **({"head_dim": args.head_dim} if args.attention_head_dim is not None else {}),
        "rms_norm_eps": args.norm_eps,
        "rope_theta": args.rope_theta,
        **rope_scaling(args),
        "hidden_act": "silu",
        "sliding_window": None,
        "num_local_experts": args.n_experts,
        "num_experts_per_tok": args.experts_per_token,
        "router_aux_loss_coef": args.router_aux_loss_coef,
    }


def _args_from_config(config: dict[str, Any], shape: dict[str, Any]) -> ModelArgs:
    rope = rope_from_hf_config(config, "rope_theta", "partial_rotary_factor", 1.0)
    require(config, "hidden_act", lambda v: v == "silu", "is not supported (silu only)")
    require(config, "sliding_window", lambda v: v is None, "is not supported (full causal attention only)")
    head_dim = config.get("head_dim")
    if head_dim is not None and head_dim * shape["n_heads"] == shape["dim"]:
        head_dim = None
    return ModelArgs(
        flavor="mixtral", **shape, n_kv_heads=config.get("num_key_value_heads"), attention_head_dim=head_dim,
        norm_eps=config.get("rms_norm_eps", 1e-5), **rope, n_experts=config.get("num_local_experts", 8),
        experts_per_token=config.get("num_experts_per_tok", 2),
        router_aux_loss_coef=float(config.get("router_aux_loss_coef", 0.001)),
    )  # fmt: skip


MIXTRAL_HF = HFAdapter(
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
        "feed_forward.router.gate.weight": "block_sparse_moe.gate.weight",
        "attention_norm.weight": "input_layernorm.weight",
        "ffn_norm.weight": "post_attention_layernorm.weight",
    },
    experts={
        "feed_forward.experts.w1": "block_sparse_moe.experts.{expert}.w1.weight",
        "feed_forward.experts.w3": "block_sparse_moe.experts.{expert}.w3.weight",
        "feed_forward.experts.w2": "block_sparse_moe.experts.{expert}.w2.weight",
    },
    config=_config,
    args_from_config=_args_from_config,
)
