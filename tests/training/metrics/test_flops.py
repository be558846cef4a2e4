import subprocess
import sys

import pytest
import torch

from planner import flops as planner_flops
from planner.hardware import hardware
from spec.platform.instances import GPUS, instance_facts
from training.metrics import flops as metrics_flops
from training.metrics.flops import (
    device_peak_flops,
    gpu_peak_flops,
    measure_matmul_flops,
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


@pytest.mark.parametrize(
    ("device_name", "peak"),
    [
        ("NVIDIA H100 80GB HBM3", 989e12),  # SXM (p5)
        ("NVIDIA H100 PCIe", 756e12),
        ("NVIDIA H100 NVL", 835e12),
        ("NVIDIA H200", 989e12),
        ("NVIDIA A100-SXM4-40GB", 312e12),
        ("NVIDIA A100-SXM4-80GB", 312e12),
        ("NVIDIA A10G", 70e12),  # g5: not the A10's 125 T
        ("NVIDIA B200", 2250e12),
    ],
)
def test_gpu_peaks_are_dense_bf16_by_exact_device_name(device_name: str, peak: float) -> None:
    found = gpu_peak_flops(device_name)
    assert found is not None and found[0] == peak
    assert "dense bf16" in found[1]


@pytest.mark.parametrize("device_name", ["NVIDIA H100", "NVIDIA H100 80GB HBM3 (fake)", "Some Future GPU"])
def test_a_name_that_is_not_exactly_known_has_no_peak(device_name: str) -> None:
    assert gpu_peak_flops(device_name) is None


def test_an_unknown_gpu_is_a_one_line_error_naming_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA GeForce RTX 4090")
    with pytest.raises(ValueError) as error:
        device_peak_flops(torch.device("cuda", 0))
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith("metrics.peak_flops: no dense bf16 peak is known for GPU 'NVIDIA GeForce RTX 4090'")
    assert "'measure'" in message and "NVIDIA H100 80GB HBM3" in message


def test_gpu_peaks_come_from_the_instance_facts_table() -> None:
    for name in ("p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge"):
        facts = instance_facts(name)
        assert facts.gpu_device is not None
        assert gpu_peak_flops(facts.gpu_device)[0] == facts.peak_bf16_flops_per_accelerator, name
        assert GPUS[facts.gpu_device].memory_gib == facts.accelerator_memory_gib, name


def test_the_planner_uses_these_formulas_not_a_copy() -> None:
    for name in (
        "model_flops_per_token",
        "recompute_flops_per_token",
        "hardware_flops_per_token",
        "megatron_flops_per_iteration",
        "megatron_flops_per_token",
        "recomputed_block_fraction",
    ):
        assert getattr(planner_flops, name) is getattr(metrics_flops, name), name
    assert hardware("p5.48xlarge").peak_flops_per_device == gpu_peak_flops("NVIDIA H100 80GB HBM3")[0]


def test_measure_is_a_config_choice() -> None:
    value, source = device_peak_flops(torch.device("cpu"), override="measure")
    assert value > 0 and source.startswith("fp32 matmul measured on this CPU")


def test_cpu_peak_is_measured_and_overrides_win() -> None:
    measured = measure_matmul_flops(torch.device("cpu"), size=128, repeats=2)
    assert 1e6 < measured < 1e14
    assert device_peak_flops(torch.device("cpu"), override=5e9) == (5e9, "metrics.peak_flops (config)")
    value, source = device_peak_flops(torch.device("cpu"))
    assert value > 0 and source.startswith("fp32 matmul measured on this CPU")


def _peak_in_a_child(busy_neighbours: int) -> float:
    """The CPU peak measured by a process pinned to one core, beside `busy_neighbours` busy loops on that core."""
    code = (
        "import os, subprocess, sys, torch\n"
        "from training.metrics.flops import measure_matmul_flops\n"
        "os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
        "torch.set_num_threads(1)\n"
        f"loops = [subprocess.Popen([sys.executable, '-c', 'while True: pass']) for _ in range({busy_neighbours})]\n"
        "try:\n"
        "    print(measure_matmul_flops(torch.device('cpu')))\n"
        "finally:\n"
        "    for loop in loops:\n"
        "        loop.kill()\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    return float(result.stdout)


def test_the_cpu_peak_does_not_shrink_when_the_core_is_shared() -> None:
    """Ranks that start together share the cores while rank 0 measures the peak. Measured in wall time, a core
    shared four ways gave a quarter of the peak, and MFU read over 100 % once the neighbours went quiet; measured
    in this thread's CPU time, what the others take does not count."""
    alone, shared = _peak_in_a_child(0), _peak_in_a_child(3)
    assert shared > 0.6 * alone, (alone, shared)
