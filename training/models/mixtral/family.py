"""The Mixtral family's descriptor: Llama attention (no q/k norms) and the mixture-of-experts feed-forward. The
DeepSeek-V3-style shapes live here too: shared plus many routed experts and the aux-loss-free router bias, with
grouped-query attention in place of DeepSeek's multi-head latent attention (MLA is not built)."""

from __future__ import annotations

from training.models.family import ModelFamily, Shape
from training.models.qwen3.family import (
    active_layer_parameters,
    layer_parameters,
    moe_problems,
    neuron_architecture,
    saved_none,
    saved_selective,
)


def _shape_problems(shape: Shape) -> list[str]:
    if not shape.is_moe:
        return [f"model.n_experts: {shape.n_experts!r} must be positive in the mixtral flavor (dense: llama)"]
    if shape.qk_norm:
        return [f"model.qk_norm: {shape.qk_norm!r} q/k norms are a qwen3-flavor feature"]
    return moe_problems(shape)


MIXTRAL = ModelFamily(
    name="mixtral",
    description="Mixtral: Llama attention, a top-k mixture of SwiGLU experts (DeepSeek-V3-style shapes without MLA)",
    norm="rmsnorm",
    block="training.models.mixtral.model:MixtralBlock",
    hf_adapter="training.models.mixtral.hf:MIXTRAL_HF",
    configs="training.models.mixtral.configs",
    hf_model_types=("mixtral",),
    shape_problems=_shape_problems,
    layer_parameters=layer_parameters,
    saved_activation_elements={"selective": saved_selective, "none": saved_none},
    lora_targets=(),
    megatron_gap="NeMo 2's renderer builds its llama3 recipe only",
    bridge_gap="Megatron Bridge 0.6 has no Mixtral bridge or recipe",
    neuron_architecture=neuron_architecture,
    active_layer_parameters=active_layer_parameters,
    neuron_gap="NxDT's GPT model section has no experts",
)
