"""llm-plan on a mixture of experts' config.json: total parameters for memory, active ones for FLOPs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from planner.plan import main

MIXTRAL = Path(__file__).parent / "hf_configs" / "mistralai--Mixtral-8x7B-v0.1.json"
LAYOUT = ["--instance", "p5.48xlarge", "--nodes", "2", "--seq", "4096", "--micro-batch", "1"]


def _plan(capsys: pytest.CaptureFixture[str], model: Path, *extra: str) -> str:
    assert main(["--model", str(model), *LAYOUT, *extra]) == 0
    return capsys.readouterr().out


def _report(capsys: pytest.CaptureFixture[str], model: Path) -> dict[str, Any]:
    return json.loads(_plan(capsys, model, "--json"))


def test_mixtral_8x7b_is_planned_with_its_total_and_active_parameters(capsys: pytest.CaptureFixture[str]) -> None:
    assert "46.70 B parameters (12.88 B active) on 2 x" in _plan(capsys, MIXTRAL)


def test_the_flops_count_the_active_parameters_and_memory_the_total(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = _report(capsys, MIXTRAL)
    model = report["model"]
    assert (model["parameters"], model["active_parameters"]) == (46_702_792_704, 12_879_925_248)
    assert model["matmul_parameters"] == model["active_parameters"] - 4096 * 32000  # the table is no matmul
    # The same total as one dense MLP eight experts wide: the memory of the weights stays, the FLOPs do not.
    config = json.loads(MIXTRAL.read_text(encoding="utf-8"))
    dense_config = {k: v for k, v in config.items() if k not in ("num_local_experts", "num_experts_per_tok")}
    dense_config |= {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "intermediate_size": 8 * 14336}
    dense_path = tmp_path / "config.json"
    dense_path.write_text(json.dumps(dense_config), encoding="utf-8")
    dense = _report(capsys, dense_path)
    assert dense["model"]["parameters"] == pytest.approx(model["parameters"], rel=1e-4)
    flops, dense_flops = (r["flops_per_token"]["model_6n_plus_attention"] for r in (report, dense))
    assert flops == pytest.approx(6 * model["matmul_parameters"] + 12 * 32 * 4096 * 4096)
    assert dense_flops > 3 * flops
    # Faster, though not by the FLOP ratio: FSDP still gathers every expert's weights each step.
    assert report["tokens_per_s_per_device"] > 1.5 * dense["tokens_per_s_per_device"]
    assert report["memory_gib_per_device"] > 0.5 * dense["memory_gib_per_device"]
