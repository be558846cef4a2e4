"""llm-plan does not plan a backend that refuses the model's family (planner/backend_family.py): NxDT has no
experts or q/k norms, Megatron Bridge has no Mixtral recipe, NeMo 2 renders its llama3 recipe only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.model_source import args_from_config_json
from planner.plan import main

CONFIGS = Path(__file__).parent / "hf_configs"
MIXTRAL = CONFIGS / "mistralai--Mixtral-8x7B-v0.1.json"
QWEN3_MOE = CONFIGS / "Qwen--Qwen3-30B-A3B.json"
QWEN3 = CONFIGS / "Qwen--Qwen3-8B.json"
P5 = ["--instance", "p5.48xlarge", "--nodes", "2", "--seq", "4096", "--micro-batch", "1"]
TRN1 = ["--instance", "trn1.32xlarge", "--nodes", "2", "--seq", "4096", "--micro-batch", "1"]


@pytest.mark.parametrize(
    ("model", "layout", "message"),
    [
        (QWEN3_MOE, TRN1, "--backend: 'neuron' cannot train model flavor 'qwen3' (NxDT's GPT model section has no"),
        (MIXTRAL, [*TRN1, "--backend", "neuron"], "--backend: 'neuron' cannot train model flavor 'mixtral'"),
        (MIXTRAL, [*P5, "--backend", "nemo"], "--backend: 'nemo' cannot train model flavor 'mixtral' (Megatron Bridge"),
        ("qwen3-8b", [*P5, "--backend", "nemo2"], "--backend: 'nemo2' cannot train model flavor 'qwen3' (NeMo 2's"),
    ],
)
def test_a_backend_that_refuses_the_family_is_not_planned(
    model: Path | str, layout: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--model", str(model), *layout])
    assert exit_.value.code == 2
    error = capsys.readouterr().err
    assert message in error and error.count("\n") == 1
    assert "plan it with --backend fsdp" in error


@pytest.mark.parametrize(
    ("model", "backend"),
    [(QWEN3, "nemo"), ("qwen3-8b", "nemo"), (QWEN3_MOE, "nemo"), (QWEN3_MOE, "fsdp"), (MIXTRAL, "fsdp")],
)
def test_a_backend_that_trains_the_family_is_planned(
    model: Path | str, backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--model", str(model), *P5, "--backend", backend]) == 0
    assert "parameters" in capsys.readouterr().out


def test_a_dense_qwen3_config_json_is_the_qwen3_family_and_nemo2_is_refused_for_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Read from its config.json (not only by name), a dense Qwen3 is the qwen3 family: its q/k norms are what NeMo
    2's llama3 recipe cannot build. It was read as a llama with q/k norms, and NeMo 2 was planned for it."""
    assert args_from_config_json(json.loads(QWEN3.read_text()), str(QWEN3)).flavor == "qwen3"
    with pytest.raises(SystemExit) as exit_:
        main(["--model", str(QWEN3), *P5, "--backend", "nemo2"])
    assert exit_.value.code == 2
    assert "--backend: 'nemo2' cannot train model flavor 'qwen3' (NeMo 2's" in capsys.readouterr().err
