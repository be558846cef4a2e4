"""The mixtral family against transformers' MixtralForCausalLM (the oracle), both directions, in the Hub's
checkpoint names (block_sparse_moe.*); what Mixtral cannot hold is refused in one line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from safetensors import safe_open

from tests.training.models.transformers_oracle import (
    ATOL,
    hf_from_ours,
    max_logit_difference,
    ours_from_hf,
    random_hf_model,
    random_ours,
    token_ids,
)
from training.models.args import ModelArgsError
from training.models.hf import args_from_hf_config, hf_config
from training.models.registry import get_model_args

SHAPES = {
    "mixtral": get_model_args("mixtral-tiny"),
    "mixtral-top-3-of-6": get_model_args("mixtral-tiny").replace(n_experts=6, experts_per_token=3),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_transformers_weights_give_the_same_logits_in_ours(shape: str, tmp_path: Path) -> None:
    args = SHAPES[shape]
    hf_model = random_hf_model(args)
    assert type(hf_model).__name__ == "MixtralForCausalLM"
    ours = ours_from_hf(args, hf_model, tmp_path)
    assert max_logit_difference(ours, hf_model, token_ids(args)) < ATOL


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_our_export_loads_in_transformers_with_the_same_logits(shape: str, tmp_path: Path) -> None:
    args = SHAPES[shape]
    ours = random_ours(args)
    hf_model = hf_from_ours(args, ours, tmp_path)
    assert max_logit_difference(ours, hf_model, token_ids(args, seed=1)) < ATOL


def test_the_export_writes_the_hub_names_one_tensor_per_expert(tmp_path: Path) -> None:
    args = get_model_args("mixtral-tiny")
    hf_from_ours(args, random_ours(args), tmp_path)
    with safe_open(str(tmp_path / "model.safetensors"), framework="pt") as handle:
        names = set(handle.keys())
    assert "model.layers.1.block_sparse_moe.gate.weight" in names
    assert {f"model.layers.0.block_sparse_moe.experts.{j}.w2.weight" for j in range(args.n_experts)} <= names
    assert not [name for name in names if ".mlp." in name]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"n_shared_experts": 1}, "n_shared_experts"),
        ({"router_score": "sigmoid"}, "router_score"),
        ({"router_bias_update_rate": 0.001}, "router_bias_update_rate"),
        ({"norm_topk_prob": False}, "norm_topk_prob"),
        ({"expert_ffn_dim": 32}, "expert_ffn_dim"),
    ],
)
def test_shapes_mixtral_cannot_hold_have_no_export(change: dict, field: str) -> None:
    with pytest.raises(ModelArgsError, match=rf"^model\.{field}: .* has no MixtralForCausalLM export"):
        hf_config(get_model_args("mixtral-tiny").replace(**change))


def test_the_deepseek_v3_style_shape_has_no_export() -> None:
    with pytest.raises(ModelArgsError, match=r"^model\.n_shared_experts: 1 has no MixtralForCausalLM export"):
        hf_config(get_model_args("deepseek-v3-tiny"))


def test_a_sliding_window_is_refused_on_import() -> None:
    config = hf_config(get_model_args("mixtral-tiny")) | {"sliding_window": 4096}
    with pytest.raises(ModelArgsError, match="^" + re.escape("config.json sliding_window: 4096 is not supported")):
        args_from_hf_config(config)
