import pytest
import torch

from training.metrics.flops import (
    device_peak_flops,
    gpu_peak_flops,
    measure_cpu_matmul_flops,
    megatron_flops_per_iteration,
    model_flops_per_token,
    recompute_flops_per_token,
)
from training.models import count_parameters, get_model_args


def test_six_n_plus_attention_term() -> None:
    args = get_model_args("llama2-7b")
    expected = 6 * count_parameters(args).flop_params + 12 * 32 * 4096 * 4096
    assert model_flops_per_token(args, 4096) == expected
    # ~ 6.6e9 parameters in matmuls: about 40 GFLOP plus 6.4 GFLOP of attention per token at 4k context.
    assert model_flops_per_token(args, 4096) == pytest.approx(46.1e9, rel=0.01)


def test_megatron_formula_without_recompute_equals_six_n_for_a_gpt_shape() -> None:
    # For a GPT-style block (4h MLP, multi-head attention, untied head) the seed-003 formula is the 6N + 12lhs
    # count plus one extra forward: 96/72 x. Biases and norms are the only difference.
    args = get_model_args("125m").replace(tie_embeddings=False)
    batch, seq = 8, 2048
    with_recompute = megatron_flops_per_iteration(args, batch, seq)
    without = (
        with_recompute
        * 72
        / 96
        * (1 + seq / (6 * args.dim) + args.vocab_size / (12 * args.n_layers * args.dim))
        / (1 + seq / (6 * args.dim) + args.vocab_size / (16 * args.n_layers * args.dim))
    )
    assert without / (batch * seq) == pytest.approx(model_flops_per_token(args, seq), rel=0.005)


def test_full_recompute_adds_one_forward_of_every_block() -> None:
    args = get_model_args("llama2-13b")
    none, full = recompute_flops_per_token(args, 4096, 0.0), recompute_flops_per_token(args, 4096, 1.0)
    assert none == 0
    blocks = args.n_layers * count_parameters(args).per_layer
    assert full == pytest.approx(2 * blocks + 4 * args.n_layers * args.dim * 4096)
    assert recompute_flops_per_token(args, 4096, 0.5) == pytest.approx(full / 2)


def test_gpu_peaks_are_dense_bf16() -> None:
    assert gpu_peak_flops("NVIDIA H100 80GB HBM3") == (989e12, "H100 dense bf16 (table)")
    assert gpu_peak_flops("NVIDIA H200")[0] == 989e12
    assert gpu_peak_flops("NVIDIA A100-SXM4-80GB")[0] == 312e12
    assert gpu_peak_flops("Some Future GPU") is None


def test_cpu_peak_is_measured_and_overrides_win() -> None:
    measured = measure_cpu_matmul_flops(size=128, repeats=2)
    assert 1e6 < measured < 1e14
    assert device_peak_flops(torch.device("cpu"), override=5e9) == (5e9, "metrics.peak_flops (config)")
    value, source = device_peak_flops(torch.device("cpu"))
    assert value > 0 and source.startswith("fp32 matmul measured on this CPU")
