"""The Qwen3 family's descriptor: Qwen3 dense and Qwen3-MoE share the block (per-head q/k RMSNorm, then a SwiGLU or
a mixture of experts). The parameter and activation arithmetic here serves the mixtral family too (no torch)."""

from __future__ import annotations

from typing import Any

from training.models.family import BridgeRecipe, ModelFamily, Shape


def _kv_dim(shape: Shape) -> int:
    return shape.kv_heads * shape.head_dim


def _attention_and_norms(shape: Shape) -> int:
    dim, q_dim, kv_dim = shape.dim, shape.attention_dim, _kv_dim(shape)
    attention = 2 * dim * q_dim + 2 * dim * kv_dim
    return attention + 2 * dim + (2 * shape.head_dim if shape.qk_norm else 0)


def _feed_forward(shape: Shape, routed: int) -> int:
    """The MLP's parameters with `routed` routed experts counted (all of them, or the top k a token uses)."""
    if not shape.is_moe:
        return 3 * shape.dim * shape.ffn_dim
    experts = (routed + shape.n_shared_experts) * 3 * shape.dim * shape.expert_width
    return shape.n_experts * shape.dim + experts  # the router's gate, then the SwiGLU experts


def layer_parameters(shape: Shape) -> int:
    return _attention_and_norms(shape) + _feed_forward(shape, shape.n_experts)


def active_layer_parameters(shape: Shape) -> int:
    return _attention_and_norms(shape) + _feed_forward(shape, shape.experts_per_token if shape.is_moe else 0)


def _mlp_width_per_token(shape: Shape) -> int:
    """Hidden SwiGLU width one token passes through: ffn_dim dense, k routed plus the shared experts otherwise."""
    if not shape.is_moe:
        return shape.ffn_dim
    return (shape.experts_per_token + shape.n_shared_experts) * shape.expert_width


def saved_selective(shape: Shape) -> int:
    # Llama's count (block input, q/k/v, attention out, wo out, w1/w3 out, w2 out) with the MLP widths a token
    # uses, plus the k dispatched copies of the token and its k expert outputs under MoE (an estimate, not
    # measured as Llama's was).
    dispatched = 2 * shape.experts_per_token * shape.dim if shape.is_moe else 0
    return 5 * shape.dim + 2 * _kv_dim(shape) + 2 * _mlp_width_per_token(shape) + dispatched


def saved_none(shape: Shape) -> int:
    dispatched = 2 * shape.experts_per_token * shape.dim if shape.is_moe else 0
    return 6 * shape.dim + 2 * _kv_dim(shape) + 4 * _mlp_width_per_token(shape) + dispatched


def moe_problems(shape: Shape) -> list[str]:
    if shape.rotary_pct != 1.0:
        return [f"model.rotary_pct: {shape.rotary_pct!r} partial rotary is a neox-flavor feature"]
    if shape.qkv_bias:
        return [f"model.qkv_bias: {shape.qkv_bias!r} q/k/v biases are a llama-flavor (Qwen2) feature"]
    return []


def _shape_problems(shape: Shape) -> list[str]:
    if not shape.qk_norm:
        return [f"model.qk_norm: {shape.qk_norm!r} must be true in the qwen3 flavor (Qwen3 normalises q and k)"]
    return moe_problems(shape)


def bridge_recipe(shape: Shape) -> BridgeRecipe:
    """megatron-bridge 0.6's recipes (recipes/qwen/h100/): Qwen3-8B's for dense shapes; for MoE shapes the 8-GPU
    Qwen3-30B-A3B one, whose token dispatcher is Megatron Core's all-to-all (the 16-GPU alias needs HybridEP)."""
    if shape.is_moe:
        return BridgeRecipe(
            "megatron.bridge.recipes.qwen.h100.qwen3_moe",
            "qwen3_30b_a3b_pretrain_8gpu_h100_bf16_config",
            "Qwen/Qwen3-30B-A3B",
        )
    return BridgeRecipe("megatron.bridge.recipes.qwen", "qwen3_8b_pretrain_config", "Qwen/Qwen3-8B")


def neuron_architecture(shape: Shape) -> dict[str, Any]:
    # Only what the shared check reads: NxDT is not given these families (launch/neuron.py runs llama and neox).
    return {"normalization": "rmsnorm", "activation": "swiglu", "num_kv_heads": shape.kv_heads}


QWEN3 = ModelFamily(
    name="qwen3",
    description="Qwen3: Llama attention with per-head q/k RMSNorm, SwiGLU MLP or a top-k mixture of experts",
    norm="rmsnorm",
    block="training.models.qwen3.model:Qwen3Block",
    hf_adapter="training.models.qwen3.hf:QWEN3_HF",
    configs="training.models.qwen3.configs",
    hf_model_types=("qwen3", "qwen3_moe"),
    shape_problems=_shape_problems,
    layer_parameters=layer_parameters,
    saved_activation_elements={"selective": saved_selective, "none": saved_none},
    lora_targets=(),  # training/finetune/lora.py adapts the llama family's linears only
    megatron_gap="NeMo 2's renderer builds its llama3 recipe only; Megatron Bridge (megatron-bridge-*) has Qwen3's",
    bridge_recipe=bridge_recipe,
    neuron_architecture=neuron_architecture,
    active_layer_parameters=active_layer_parameters,
    neuron_gap="NxDT's GPT model section has no per-head q/k norms or experts",
)
