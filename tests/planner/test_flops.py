import pytest

from planner.flops import (
    hardware_flops_per_token,
    megatron_flops_per_iteration,
    megatron_flops_per_token,
    model_flops_per_token,
    recompute_flops_per_token,
    recomputed_block_fraction,
)
from training.models.registry import get_model_args


@pytest.mark.parametrize("name", ["llama2-7b", "1b", "pythia-6.9b"])
def test_model_flops_agree_with_the_trainers_mfu_formula(name: str) -> None:
    from training.metrics.flops import model_flops_per_token as trainer_formula  # imports torch; the planner must not

    args = get_model_args(name)
    assert model_flops_per_token(args, 4096) == trainer_formula(args, 4096)


def test_megatron_formula_equals_6n_plus_attention_plus_recompute_for_a_gpt_shape() -> None:
    # For a 4h-MLP multi-head GPT the two formulas count the same matmuls; only biases and norms differ.
    args = get_model_args("megatron-gpt-18b")
    ours = hardware_flops_per_token(args, 2048, recomputed_block_fraction("full", args.n_layers))
    assert megatron_flops_per_token(args, 2048, recompute=True) == pytest.approx(ours, rel=0.005)
    assert megatron_flops_per_token(args, 2048, recompute=False) == pytest.approx(
        model_flops_per_token(args, 2048), rel=0.005
    )


def test_megatron_formula_by_hand() -> None:
    args = get_model_args("megatron-gpt-1.7b")  # h 2304, l 24, V 51200
    h, layers, seq, batch = 2304, 24, 2048, 512
    expected = 96 * batch * seq * layers * h**2 * (1 + seq / (6 * h) + 51200 / (16 * layers * h))
    assert megatron_flops_per_iteration(args, batch, seq) == pytest.approx(expected)


def test_recompute_fractions() -> None:
    assert recomputed_block_fraction("none", 32) == 0.0
    assert recomputed_block_fraction("selective", 32) == 0.5  # per-op: every other matmul recomputed
    assert recomputed_block_fraction("full", 32) == 1.0
    assert recomputed_block_fraction("every_n", 40, 2) == 0.5
    assert recomputed_block_fraction("every_n", 5, 2) == 0.6  # blocks 0, 2, 4


def test_full_recompute_adds_about_a_third() -> None:
    # The PyTorch FSDP blog's A100 70B row: HFU / MFU = 0.67 / 0.50 = 1.34.
    args = get_model_args("llama2-70b")
    ratio = hardware_flops_per_token(args, 4096, 1.0) / model_flops_per_token(args, 4096)
    assert ratio == pytest.approx(0.67 / 0.50, rel=0.03)
    assert recompute_flops_per_token(args, 4096, 0.0) == 0.0
