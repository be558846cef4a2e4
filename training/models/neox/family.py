"""The GPT-NeoX family's descriptor: shape rules, parameter and activation arithmetic, recipe facts."""

from __future__ import annotations

from typing import Any

from training.models.family import ModelFamily, Shape, dense_only_problems


def _shape_problems(shape: Shape) -> list[str]:
    out = []
    llama_only = [field for field in ("attention_head_dim", "qk_norm", "qkv_bias") if getattr(shape, field)]
    if llama_only:
        out.append(f"model.{llama_only[0]}: {getattr(shape, llama_only[0])!r} is a llama-flavor feature")
    if shape.n_kv_heads not in (None, shape.n_heads):
        out.append(f"model.n_kv_heads: {shape.n_kv_heads!r} grouped-query attention is a llama-flavor feature")
    return out + dense_only_problems(shape, "neox")


def _layer_parameters(shape: Shape) -> int:
    dim, ffn = shape.dim, shape.ffn_dim
    attention = (3 * dim * dim + 3 * dim) + (dim * dim + dim)
    mlp = (dim * ffn + ffn) + (ffn * dim + dim)
    norms = 2 * 2 * dim
    return attention + mlp + norms


def _saved_selective(shape: Shape) -> int:
    return 7 * shape.dim + shape.ffn_dim  # block input, qkv, attention out, dense out, MLP up and down outputs


def _saved_none(shape: Shape) -> int:
    # input, two layer-norm outputs, qkv and rotated q/k, attention out, MLP up out, GELU out
    return 9 * shape.dim + 2 * shape.ffn_dim


def _neuron_architecture(shape: Shape) -> dict[str, Any]:
    # Parallel attention and MLP off one input is the GPT-J/NeoX block; rotary on rotary_pct of each head.
    return {
        "normalization": "layernorm",
        "activation": "gelu",
        "transformer_block_type": "gpt_j",
        "has_bias": True,
        "num_kv_heads": shape.n_heads,
        "rotary_percentage": shape.rotary_pct,
    }


NEOX = ModelFamily(
    name="neox",
    description="GPT-NeoX: LayerNorm, GELU MLP with biases, attention and MLP in parallel, partial rotary",
    norm="layernorm",
    block="training.models.neox.model:NeoXBlock",
    hf_adapter="training.models.neox.hf:NEOX_HF",
    configs="training.models.neox.configs",
    hf_model_types=("gpt_neox",),
    shape_problems=_shape_problems,
    layer_parameters=_layer_parameters,
    saved_activation_elements={"selective": _saved_selective, "none": _saved_none},
    lora_targets=(),  # training/finetune/lora.py adapts Llama-shaped blocks only
    megatron_gap="Megatron has no parallel attention/MLP block",
    neuron_architecture=_neuron_architecture,
    # The Trainium NeoX/Pythia blog's runs on trn1.32xlarge (Pythia 6.9B: TP 8; GPT-NeoX 20B: TP 8, PP 4).
    neuron_parallelism={"pythia-6.9b": (8, 1), "neox-20b": (8, 4)},
)
