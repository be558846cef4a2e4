"""`llm-plan --finetune full|lora` against a hand computation for a small model (planner/finetune.py)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from planner.finetune import linear_shapes, lora_parameters
from planner.hardware import hardware
from planner.job import Job, PlanError
from planner.memory import GIB, block_activation_bytes_per_token, job_memory
from planner.step_time import matmul_flops_by_rate
from training.finetune.config import LORA_TARGETS, LoraSection
from training.models.args import ModelArgs
from training.models.params import count_parameters
from training.models.registry import get_model_args

REPO = Path(__file__).resolve().parents[2]
# dim 64, 2 layers, 4 heads of 16, 2 KV heads, ffn 192, vocab 512.
SMALL: ModelArgs = dataclasses.replace(
    get_model_args("tiny"), dim=64, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=192, vocab_size=512
)


def _job(lora_rank: int | None) -> Job:
    return Job(model=SMALL, hardware=hardware("p5.48xlarge"), nodes=1, seq_len=128, micro_batch=1,
               lora_rank=lora_rank)  # fmt: skip


def test_adapter_parameters_by_hand() -> None:
    # q 64x64: 8*(64+64); k, v 64x32: 8*(64+32) each; o: 8*(64+64); gate, up 64x192: 8*(64+192) each;
    # down 192x64: 8*(192+64). Per layer 8 * (128 + 96 + 96 + 128 + 256 + 256 + 256) = 8 * 1216 = 9728.
    assert lora_parameters(SMALL, 8) == 2 * 9728


def test_lora_state_is_the_frozen_bf16_base_plus_fully_trained_adapters() -> None:
    full, lora = job_memory(_job(None)), job_memory(_job(8))
    base, adapters, devices = count_parameters(SMALL).total, 2 * 9728, 8
    assert full.weights_gib * GIB == pytest.approx(2 * base / devices)
    assert full.optimizer_gib * GIB == pytest.approx(12 * base / devices)
    assert lora.weights_gib * GIB == pytest.approx(2 * (base + adapters) / devices)
    assert lora.gradients_gib * GIB == pytest.approx(2 * adapters / devices)
    assert lora.optimizer_gib * GIB == pytest.approx(12 * adapters / devices)
    # Activations as in full training plus each of the 7 adapters' rank-8 bf16 intermediate per token and layer.
    extra = 2 * 7 * 8 * 128 * 2  # bytes x adapters x rank x tokens x layers
    assert (lora.activations_gib - full.activations_gib) * GIB == pytest.approx(extra)
    assert block_activation_bytes_per_token(SMALL, "none", "flash", 128) > 0


def test_lora_skips_the_frozen_weight_gradients() -> None:
    per_layer = count_parameters(SMALL).per_layer
    full_linear, full_other = matmul_flops_by_rate(_job(None))
    lora_linear, lora_other = matmul_flops_by_rate(_job(8))
    # Blocks: 6 -> 4 FLOPs per parameter and token (no weight gradient), adapters 6 per parameter.
    assert full_linear == pytest.approx(6 * 2 * per_layer)
    assert lora_linear == pytest.approx(4 * 2 * per_layer + 6 * 2 * 9728)
    # The output head 6 -> 4 per parameter; attention's scores unchanged.
    assert full_other - lora_other == pytest.approx(2 * 64 * 512)


def test_a_bad_rank_is_one_line() -> None:
    with pytest.raises(PlanError, match="lora_rank: 0 must be an integer >= 1"):
        _job(0)


def _plan(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "planner.plan", *argv], capture_output=True, text=True, cwd=REPO,
                          check=False)  # fmt: skip


def test_the_job_yamls_finetune_section_is_the_plans_and_the_flag_overrides_it(tmp_path: Path) -> None:
    job = yaml.safe_load((REPO / "training" / "configs" / "llama3-8b.yaml").read_text())
    job["finetune"] = {"mode": "lora", "init": "/fsx/models/base", "lora": {"rank": 8}}
    path = tmp_path / "ft.yaml"
    path.write_text(yaml.safe_dump(job))
    base = ["--model", str(path), "--instance", "p5.48xlarge", "--nodes", "1", "--json"]
    lora, full = _plan(*base), _plan(*base, "--finetune", "full")
    assert lora.returncode == 0 and full.returncode == 0, lora.stderr + full.stderr
    lora_opt = yaml.safe_load(lora.stdout)["memory_breakdown_gib"]["optimizer"]
    full_opt = yaml.safe_load(full.stdout)["memory_breakdown_gib"]["optimizer"]
    assert lora_opt < full_opt / 100


def test_lora_rank_without_lora_is_refused_in_one_line() -> None:
    result = _plan("--model", "llama3-8b", "--instance", "p5.48xlarge", "--nodes", "1", "--lora-rank", "8")
    assert result.returncode == 2
    assert result.stderr.strip().endswith("error: --lora-rank: 8 applies only with --finetune lora")
    assert len(result.stderr.strip().splitlines()) == 1


def _q_only(rank: int = 8) -> Job:
    return dataclasses.replace(_job(rank), lora_target_modules=("q_proj",))


def test_adapting_only_q_proj_counts_only_its_adapters() -> None:
    # q 64x64 at rank 8: 8 * (64 + 64) = 1024 per layer, 2 layers.
    assert lora_parameters(SMALL, 8, ("q_proj",)) == 2 * 1024
    assert lora_parameters(SMALL, 8, ("down_proj", "k_proj")) == 2 * 8 * ((192 + 64) + (64 + 32))
    assert lora_parameters(SMALL, 8, LORA_TARGETS) == lora_parameters(SMALL, 8) == 2 * 9728


def test_a_lora_plan_changes_with_target_modules() -> None:
    every, q_only = _job(8), _q_only(8)
    every_memory, q_memory = job_memory(every), job_memory(q_only)
    assert q_memory.optimizer_gib * GIB == pytest.approx(12 * 2 * 1024 / 8)
    assert q_memory.gradients_gib < every_memory.gradients_gib
    # One adapter's rank-8 bf16 intermediate per token and layer instead of seven.
    extra = 2 * (7 - 1) * 8 * 128 * 2
    assert (every_memory.activations_gib - q_memory.activations_gib) * GIB == pytest.approx(extra)
    assert q_memory.total_gib < every_memory.total_gib
    # The base is frozen either way (no weight gradients anywhere); only the adapters' 6 FLOPs per parameter differ.
    every_linear, every_other = matmul_flops_by_rate(every)
    q_linear, q_other = matmul_flops_by_rate(q_only)
    assert every_linear - q_linear == pytest.approx(6 * 2 * (9728 - 1024))
    assert every_other == q_other


def test_an_unknown_target_module_is_one_line() -> None:
    with pytest.raises(PlanError, match=r"^lora_target_modules: \('qkv',\) names no linear layer of a llama block"):
        dataclasses.replace(_job(8), lora_target_modules=("qkv",))


def test_lora_on_a_family_without_lora_targets_is_one_line() -> None:
    plan = ["--model", "pythia-6.9b", "--instance", "p5.48xlarge", "--nodes", "1", "--finetune", "lora"]
    result = subprocess.run(
        [sys.executable, "-m", "planner.plan", *plan],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert (result.returncode, result.stderr.strip().splitlines()) == (
        2,
        ["python -m planner.plan: error: finetune: 'lora' has no LoRA targets in model family 'neox'"],
    )


def test_the_planner_reads_target_modules_and_the_default_rank_from_the_job_yaml(tmp_path: Path) -> None:
    job = yaml.safe_load((REPO / "training" / "configs" / "llama3-8b.yaml").read_text())
    plans = {}
    for name, lora in (("every", {}), ("q", {"target_modules": ["q_proj"]})):
        job["finetune"] = {"mode": "lora", "init": "/fsx/models/base", "lora": lora}
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(job))
        result = _plan("--model", str(path), "--instance", "p5.48xlarge", "--nodes", "1", "--json")
        assert result.returncode == 0, result.stderr
        plans[name] = json.loads(result.stdout)
    every, q = plans["every"], plans["q"]
    assert q["memory_breakdown_gib"]["optimizer"] < every["memory_breakdown_gib"]["optimizer"] / 5
    assert q["memory_gib_per_device"] < every["memory_gib_per_device"]
    assert q["step_time_s"] != every["step_time_s"]


def test_the_default_lora_rank_is_the_trainers() -> None:
    """`llm-plan --finetune lora` without --lora-rank plans the rank a finetune: section without one trains."""
    result = _plan("--model", "llama3-8b", "--instance", "p5.48xlarge", "--nodes", "1", "--finetune", "lora", "--json")
    assert result.returncode == 0, result.stderr
    optimizer_gib = json.loads(result.stdout)["memory_breakdown_gib"]["optimizer"]
    adapters = lora_parameters(get_model_args("llama3-8b"), LoraSection().rank, LoraSection().target_modules)
    assert optimizer_gib * GIB == pytest.approx(12 * adapters / 8)


def test_every_lora_target_has_a_shape_a_trainer_module_and_a_bridge_name() -> None:
    """Adding a target_modules name: the config's list, the planner's shapes, the trainer's module map and
    Megatron Bridge's name all take it, or this fails."""
    from launch.bridge_finetune import CANONICAL_LORA_TARGETS
    from training.finetune.config import HF_LINEAR_MODULES
    from training.models.families import family_named

    names = set(HF_LINEAR_MODULES)
    trainer_modules = {target.hf_name for target in family_named(SMALL.flavor).lora_targets}
    assert set(linear_shapes(SMALL)) == trainer_modules == set(CANONICAL_LORA_TARGETS) == names
