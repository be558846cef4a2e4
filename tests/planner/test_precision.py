"""--precision fp8: the FP8 peak comes from the instance table; FP8 runs the blocks' linear layers at the FP8 rate and
leaves attention scores, the output head and everything memory-bound at their bf16 cost; memory adds the FP8 copies
of the weights; optimizer states are unchanged. Hardware without cited FP8 rates is refused."""

import dataclasses

import pytest

from planner.hardware import hardware
from planner.job import Job, PlanError, Software
from planner.memory import job_memory
from planner.step_time import estimate_step, matmul_flops_by_rate
from spec.platform.instances import instance_facts
from training.models.params import count_parameters
from training.models.registry import MODEL_CONFIGS

LLAMA = MODEL_CONFIGS["llama2-70b"]


def _job(instance: str = "p5.48xlarge", precision: str = "bf16", **kw: int) -> Job:
    fields = {"nodes": 8, "seq_len": 4096, "micro_batch": 1, "tensor_parallel": 4, "pipeline_parallel": 2}
    fields |= kw
    return Job(
        model=LLAMA,
        hardware=hardware(instance),
        checkpointing="selective",
        software=Software(sharding="zero1", precision=precision),  # type: ignore[arg-type]
        **fields,
    )


def test_fp8_peaks_are_the_dense_tensor_core_figures() -> None:
    assert instance_facts("p5.48xlarge").peak_fp8_flops_per_accelerator == 1979e12  # H100 SXM, not sparse 3958
    assert instance_facts("p5e.48xlarge").peak_fp8_flops_per_accelerator == 1979e12
    assert instance_facts("p4de.24xlarge").peak_fp8_flops_per_accelerator is None  # A100: no FP8 tensor cores
    assert instance_facts("trn1.32xlarge").peak_fp8_flops_per_accelerator is None  # not cited above its bf16 rate
    assert hardware("p5.48xlarge").peak_fp8_flops_per_device == 1979e12


@pytest.mark.parametrize(("instance", "needle"), [("p4de.24xlarge", "A100"), ("trn1.32xlarge", "Trainium1")])
def test_fp8_without_a_cited_fp8_rate_is_refused(instance: str, needle: str) -> None:
    with pytest.raises(PlanError) as caught:
        _job(instance, "fp8", nodes=2, tensor_parallel=8, pipeline_parallel=1)
    message = str(caught.value)
    assert message.startswith("precision: 'fp8'") and needle in message and "\n" not in message


def test_bad_precision_is_named() -> None:
    with pytest.raises(PlanError, match="precision: 'fp4' is not one of bf16, fp8"):
        _job(precision="fp4")


def test_fp8_moves_only_the_block_linears_to_the_fp8_rate() -> None:
    bf16, fp8 = _job(), _job(precision="fp8")
    linear, other = matmul_flops_by_rate(bf16)
    assert linear > 0 and other > 0
    assert matmul_flops_by_rate(fp8) == (linear, other)  # the FLOPs are the same; only their rate differs
    b, f = estimate_step(bf16), estimate_step(fp8)
    share, speedup = linear / (linear + other), 1979 / 989
    # bf16: all at one rate; fp8: the linear share at the FP8 rate (1979 / 989 TFLOP/s on an H100 SXM)
    assert f.matmul_s == pytest.approx(b.matmul_s * (share / speedup + (1 - share)), rel=1e-9)
    assert f.memory_bound_s == b.memory_bound_s and f.tensor_parallel.seconds == b.tensor_parallel.seconds
    assert b.step_s / 2 < f.step_s < b.step_s


def test_mfu_stays_against_the_bf16_peak_and_model_tflops_are_absolute() -> None:
    b, f = estimate_step(_job()), estimate_step(_job(precision="fp8"))
    assert f.peak_flops_per_device == b.peak_flops_per_device == 989e12
    assert f.model_tflops_per_device == pytest.approx(f.mfu * 989)


def test_fp8_keeps_optimizer_states_and_adds_the_fp8_weight_copies() -> None:
    b, f = job_memory(_job()), job_memory(_job(precision="fp8"))
    assert f.optimizer_gib == b.optimizer_gib and f.activations_gib == b.activations_gib
    block_params = count_parameters(LLAMA).per_layer * LLAMA.n_layers / (4 * 2)  # TP 4 x PP 2
    # an e4m3 copy of each local block weight and its transpose (Hopper's FP8 GEMMs read both layouts)
    assert (f.weights_gib - b.weights_gib) * 2**30 == pytest.approx(2 * block_params)


def test_precision_is_a_software_setting_the_cli_passes() -> None:
    job = _job(precision="fp8")
    assert job.software.precision == "fp8"
    assert dataclasses.replace(job.software, precision="bf16").precision == "bf16"
