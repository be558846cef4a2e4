"""The Llama family's descriptor: shape rules, parameter and activation arithmetic, LoRA targets, recipe facts."""

from __future__ import annotations

from typing import Any

from training.models.family import BridgeRecipe, LoraTarget, ModelFamily, Shape, dense_only_problems


def _shape_problems(shape: Shape) -> list[str]:
    if shape.rotary_pct != 1.0:
        return [f"model.rotary_pct: {shape.rotary_pct!r} partial rotary is a neox-flavor feature"]
    return dense_only_problems(shape, "llama")


def _layer_parameters(shape: Shape) -> int:
    dim, ffn, kv_dim, q_dim = shape.dim, shape.ffn_dim, shape.kv_heads * shape.head_dim, shape.attention_dim
    attention = dim * q_dim + 2 * dim * kv_dim + q_dim * dim + ((q_dim + 2 * kv_dim) if shape.qkv_bias else 0)
    mlp = 3 * dim * ffn
    norms = 2 * dim + (2 * shape.head_dim if shape.qk_norm else 0)
    return attention + mlp + norms


def _kv_dim(shape: Shape) -> int:
    return shape.kv_heads * shape.head_dim


def _saved_selective(shape: Shape) -> int:
    # block input, q/k/v, attention out, wo out, w1/w3 out, w2 out
    return 5 * shape.dim + 2 * _kv_dim(shape) + 2 * shape.ffn_dim


def _saved_none(shape: Shape) -> int:
    # Measured (bench/activation_memory.py, saved-tensor hooks): the two norm inputs and outputs, rotated q,
    # rotated k, v, the attention output (wo reads it as a view), w1 and w3 outputs, silu output, product.
    return 6 * shape.dim + 2 * _kv_dim(shape) + 4 * shape.ffn_dim


def _neuron_architecture(shape: Shape) -> dict[str, Any]:
    return {
        "normalization": "rmsnorm",
        "activation": "swiglu",
        "transformer_block_type": "pre_ln",
        "has_bias": False,
        "num_kv_heads": shape.kv_heads,
        "rotary_percentage": 1.0,
    }


# PEFT's Llama leaf names, our module inside a block, and (in, out) features.
_LORA_TARGETS = (
    LoraTarget("q_proj", "attention.wq", lambda s: (s.dim, s.attention_dim)),
    LoraTarget("k_proj", "attention.wk", lambda s: (s.dim, _kv_dim(s))),
    LoraTarget("v_proj", "attention.wv", lambda s: (s.dim, _kv_dim(s))),
    LoraTarget("o_proj", "attention.wo", lambda s: (s.attention_dim, s.dim)),
    LoraTarget("gate_proj", "feed_forward.w1", lambda s: (s.dim, s.ffn_dim)),
    LoraTarget("up_proj", "feed_forward.w3", lambda s: (s.dim, s.ffn_dim)),
    LoraTarget("down_proj", "feed_forward.w2", lambda s: (s.ffn_dim, s.dim)),
)

LLAMA = ModelFamily(
    name="llama",
    description="Llama: RMSNorm, SwiGLU MLP, rotary on every head dim, no biases, optional GQA",
    norm="rmsnorm",
    block="training.models.llama.model:LlamaBlock",
    hf_adapter="training.models.llama.hf:LLAMA_HF",
    configs="training.models.llama.configs",
    hf_model_types=("llama",),
    shape_problems=_shape_problems,
    layer_parameters=_layer_parameters,
    saved_activation_elements={"selective": _saved_selective, "none": _saved_none},
    lora_targets=_LORA_TARGETS,
    megatron_gap=None,
    # megatron-bridge 0.6: recipes/llama/h100/llama3.py asks AutoBridge for this id.
    bridge_recipe=lambda shape: BridgeRecipe(
        "megatron.bridge.recipes.llama", "llama3_8b_pretrain_config", "meta-llama/Meta-Llama-3-8B"
    ),
    neuron_architecture=_neuron_architecture,
)
