"""training/models/moe.py: the grouped expert GEMM against its per-expert loop, the load-balancing loss against
transformers' own function, the aux-loss-free router bias, and the dense families refusing experts."""

from __future__ import annotations

import pytest
import torch
from transformers.models.qwen3_moe.modeling_qwen3_moe import load_balancing_loss_func

from training.models.args import ModelArgsError
from training.models.moe import MoE, grouped_linear, load_balancing_loss, update_router_biases
from training.models.registry import get_model_args
from training.models.transformer import build_model


def _loop(x: torch.Tensor, weight: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    pieces = torch.split(x, counts.tolist())
    return torch.cat([piece @ weight[group].T for group, piece in enumerate(pieces)])


def test_the_grouped_gemm_equals_one_matmul_per_expert_forward_and_backward() -> None:
    generator = torch.Generator().manual_seed(0)
    counts = torch.tensor([5, 0, 9, 2])  # an expert without tokens too
    x = torch.randn(int(counts.sum()), 16, generator=generator, requires_grad=True)
    weight = torch.randn(4, 32, 16, generator=generator, requires_grad=True)
    upstream = torch.randn(int(counts.sum()), 32, generator=generator)
    grouped = grouped_linear(x, weight, counts)
    grads = torch.autograd.grad((grouped * upstream).sum(), [x, weight])
    looped = _loop(x, weight, counts)
    expected = torch.autograd.grad((looped * upstream).sum(), [x, weight])
    assert torch.allclose(grouped, looped, atol=1e-6)
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(grads, expected, strict=True))


def test_unaligned_widths_take_the_loop_with_the_same_result() -> None:
    # 5 fp32 columns are 20 bytes: torch._grouped_mm refuses them, grouped_linear loops instead.
    counts = torch.tensor([3, 4])
    x, weight = torch.randn(7, 5), torch.randn(2, 6, 5)
    assert torch.allclose(grouped_linear(x, weight, counts), _loop(x, weight, counts))


def test_the_load_balancing_loss_is_transformers_pooled_over_layers() -> None:
    args = get_model_args("qwen3-moe-tiny").replace(n_layers=3, n_experts=6, experts_per_token=2)
    model = build_model(args, device="cpu")
    model.init_weights(seed=0)
    generator = torch.Generator().manual_seed(0)
    layers = [layer.feed_forward for layer in model.layers]
    assert all(isinstance(layer, MoE) for layer in layers)
    logits: list[torch.Tensor] = []
    for layer in layers:
        layer.router.gate.register_forward_hook(lambda module, inputs, out: logits.append(out))
        layer(torch.randn(2, 16, args.dim, generator=generator))  # keeps its routing in router_stats
    ours = load_balancing_loss(layers)  # type: ignore[arg-type]
    theirs = load_balancing_loss_func(tuple(logits), args.n_experts, args.experts_per_token)
    assert ours is not None and torch.allclose(ours, theirs, atol=1e-6)


def test_the_aux_free_bias_moves_towards_under_loaded_experts_and_is_checkpointed() -> None:
    args = get_model_args("deepseek-v3-tiny")
    model = build_model(args, device="cpu")
    model.init_weights(seed=0)
    router = model.layers[0].feed_forward.router
    ids = torch.randint(0, args.vocab_size, (4, 32), generator=torch.Generator().manual_seed(0))
    model(ids, labels=ids).backward()
    counts = router.tokens_per_expert.clone()
    assert counts.sum() == ids.numel() * args.experts_per_token
    update_router_biases(model)
    expected = args.router_bias_update_rate * torch.sign(counts.mean() - counts)
    assert torch.equal(router.expert_bias, expected)
    assert router.tokens_per_expert.sum() == 0
    state = model.state_dict()
    assert "layers.0.feed_forward.router.expert_bias" in state
    assert "layers.0.feed_forward.router.tokens_per_expert" not in state


def test_the_bias_changes_the_choice_not_the_weights() -> None:
    args = get_model_args("deepseek-v3-tiny")
    model = build_model(args, device="cpu")
    model.init_weights(seed=0)
    router = model.layers[0].feed_forward.router
    x = torch.randn(8, args.dim)
    with torch.no_grad():
        _, chosen, _ = router(x)
        router.expert_bias.fill_(-10.0)
        router.expert_bias[5] = 10.0  # expert 5 always chosen
        biased_weights, biased, _ = router(x)
    assert (biased == 5).any(dim=1).all()
    scores = torch.sigmoid(router.gate(x))
    picked = scores.gather(1, biased)
    assert torch.allclose(biased_weights, picked / picked.sum(dim=1, keepdim=True) * args.route_scale)
    assert not torch.equal(chosen, biased)


@pytest.mark.parametrize("name", ["tiny", "125m"])
def test_dense_families_refuse_experts(name: str) -> None:
    with pytest.raises(ModelArgsError, match=r"^model\.n_experts: 4 experts are a qwen3- or mixtral-flavor feature"):
        get_model_args(name).replace(n_experts=4, experts_per_token=2)


def test_experts_per_token_is_checked_against_the_experts() -> None:
    with pytest.raises(
        ModelArgsError, match=r"^model\.experts_per_token: 9 must be between 1 and model\.n_experts \(4\)"
    ):
        get_model_args("qwen3-moe-tiny").replace(experts_per_token=9)
