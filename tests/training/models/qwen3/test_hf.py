"""The qwen3 family against transformers' Qwen3ForCausalLM and Qwen3MoeForCausalLM (the oracle), both directions,
and the Qwen3-MoE training loss (cross-entropy plus router_aux_loss_coef x the load-balancing loss) against
transformers' own loss with output_router_logits."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from tests.training.models.transformers_oracle import (
    ATOL,
    hf_from_ours,
    max_logit_difference,
    ours_from_hf,
    random_hf_model,
    random_ours,
    shifted_labels,
    token_ids,
)
from training.models.args import ModelArgsError
from training.models.hf import args_from_hf_config, hf_config
from training.models.loss import IGNORE_INDEX
from training.models.registry import get_model_args

SHAPES = {
    "qwen3-dense": get_model_args("qwen3-tiny"),
    "qwen3-dense-untied": get_model_args("qwen3-tiny").replace(tie_embeddings=False, attention_head_dim=None),
    "qwen3-moe": get_model_args("qwen3-moe-tiny"),
    "qwen3-moe-unnormalised-top-k": get_model_args("qwen3-moe-tiny").replace(norm_topk_prob=False, experts_per_token=3),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_transformers_weights_give_the_same_logits_in_ours(shape: str, tmp_path: Path) -> None:
    args = SHAPES[shape]
    hf_model = random_hf_model(args)
    assert type(hf_model).__name__ == ("Qwen3MoeForCausalLM" if args.is_moe else "Qwen3ForCausalLM")
    ours = ours_from_hf(args, hf_model, tmp_path)
    assert max_logit_difference(ours, hf_model, token_ids(args)) < ATOL


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_our_export_loads_in_transformers_with_the_same_logits(shape: str, tmp_path: Path) -> None:
    args = SHAPES[shape]
    ours = random_ours(args)
    hf_model = hf_from_ours(args, ours, tmp_path)
    assert max_logit_difference(ours, hf_model, token_ids(args, seed=1)) < ATOL


def test_the_moe_training_loss_is_transformers_loss_with_the_router_aux_loss(tmp_path: Path) -> None:
    args = get_model_args("qwen3-moe-tiny").replace(router_aux_loss_coef=0.3)
    hf_model = random_hf_model(args)
    ours = ours_from_hf(args, hf_model, tmp_path)
    ids = token_ids(args)
    labels = shifted_labels(ids)
    theirs = hf_model(input_ids=ids, labels=ids, output_router_logits=True)
    summed = ours(ids, labels=labels)  # grad enabled: a training step's loss
    mean = summed / (labels != IGNORE_INDEX).sum()
    assert float(theirs.aux_loss.detach()) > 0
    assert abs(float(mean.detach()) - float(theirs.loss.detach())) < ATOL
    with torch.no_grad():  # evaluation reports the cross-entropy alone
        cross_entropy = ours(ids, labels=labels) / (labels != IGNORE_INDEX).sum()
    assert abs(float(mean - cross_entropy) - 0.3 * float(theirs.aux_loss.detach())) < ATOL


def test_the_aux_loss_trains_the_router() -> None:
    args = get_model_args("qwen3-moe-tiny")
    ours = random_ours(args).train()
    ids = token_ids(args)
    ours(ids, labels=shifted_labels(ids)).backward()
    with_aux = ours.layers[0].feed_forward.router.gate.weight.grad.clone()
    ours.zero_grad()
    no_aux = random_ours(args.replace(router_aux_loss_coef=0.0))
    no_aux(ids, labels=shifted_labels(ids)).backward()
    assert not torch.allclose(with_aux, no_aux.layers[0].feed_forward.router.gate.weight.grad)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"n_shared_experts": 1}, "n_shared_experts"),
        ({"router_score": "sigmoid"}, "router_score"),
        ({"router_bias_update_rate": 0.001}, "router_bias_update_rate"),
        ({"route_scale": 2.5}, "route_scale"),
    ],
)
def test_moe_shapes_qwen3moe_cannot_hold_have_no_export(change: dict, field: str) -> None:
    with pytest.raises(ModelArgsError, match=rf"^model\.{field}: .* has no Qwen3MoeForCausalLM export"):
        hf_config(get_model_args("qwen3-moe-tiny").replace(**change))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"use_sliding_window": True}, "config.json use_sliding_window: True is not supported"),
        ({"mlp_only_layers": [0]}, "config.json mlp_only_layers: [0] is not supported"),
        ({"decoder_sparse_step": 2}, "config.json decoder_sparse_step: 2 is not supported"),
    ],
)
def test_qwen3_configs_we_do_not_build_are_refused_by_key(change: dict, message: str) -> None:
    with pytest.raises(ModelArgsError, match="^" + re.escape(message)):
        args_from_hf_config(hf_config(get_model_args("qwen3-moe-tiny")) | change)
