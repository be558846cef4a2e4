"""Configs rendered from a finetune: section against Megatron Bridge's own code (0.6.0, in .bridge-venv):
tests/launch/contracts/bridge_finetune_probe.py builds the ConfigContainer with the entry point's build_config
(Bridge's llama3_8b_peft_config / llama3_8b_sft_config recipes), validates it as finetune() does, and reads our
{"input","output"} JSONL with Bridge's GPTSFTDatasetBuilder (offline packing included)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from launch.bridge_finetune import CANONICAL_LORA_TARGETS
from tests.launch.conftest import write_job
from tests.launch.sft_fixtures import ROWS, hf_init, sft_dataset
from tests.launch.test_bridge_finetune import finetune_job, render
from tests.launch.test_nemo_contract import LLAMA_JOB

PROBE = Path(__file__).resolve().parent / "contracts" / "bridge_finetune_probe.py"
WORLD = 16  # 2 x p5.48xlarge


@pytest.fixture(scope="module")
def reports(bridge_python: Path, demo_data: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp_path = tmp_path_factory.mktemp("bridge-finetune")
    prefix = sft_dataset(tmp_path / "data", demo_data)
    init = hf_init(tmp_path / "base", write_job(tmp_path / "shape.yaml", **LLAMA_JOB))
    async_job = {**finetune_job("lora", str(init)), "checkpoint": {**LLAMA_JOB["checkpoint"], "async_save": True}}
    configs = {
        "lora": render(tmp_path, prefix, async_job, name="lora"),
        "full-cp2": render(tmp_path, prefix, finetune_job("full", str(init)), "--context-parallel", "2", name="full"),
    }
    paths = [str(tmp_path / name / "bridge-config.yaml") for name in ("lora", "full")]
    result = subprocess.run(
        [str(bridge_python), str(PROBE), str(WORLD), *paths],
        capture_output=True, text=True, timeout=900, check=False, cwd=tmp_path,
    )  # fmt: skip
    lines = [line for line in result.stdout.splitlines() if line.startswith("BRIDGE-FINETUNE-PROBE ")]
    assert result.returncode == 0 and lines, result.stderr[-4000:]
    answer = json.loads(lines[-1].removeprefix("BRIDGE-FINETUNE-PROBE "))
    return {"init": str(init), **dict(zip(configs, answer["reports"], strict=True))}


def test_bridge_validates_our_sft_and_peft_configs(reports: dict[str, Any]) -> None:
    for name in ("lora", "full-cp2"):
        assert reports[name]["errors"] == {}, name


def test_lora_is_bridges_canonical_lora_on_every_linear_layer(reports: dict[str, Any]) -> None:
    assert reports["lora"]["peft"] == {
        "type": "CanonicalLoRA",
        "target_modules": list(CANONICAL_LORA_TARGETS.values()),
        "dim": 16,
        "alpha": 32.0,
        "dropout": 0.0,
    }
    assert reports["full-cp2"]["peft"] is None


def test_init_checkpoints_signal_and_async_save_follow_the_pretraining_contract(reports: dict[str, Any]) -> None:
    for name, run in (("lora", "lora"), ("full-cp2", "full")):
        checkpoint = reports[name]["checkpoint"]
        assert checkpoint["pretrained_checkpoint"] == reports["init"]
        assert checkpoint["save"] == checkpoint["load"] and checkpoint["save"].endswith(f"/{run}/checkpoints")
        assert (reports[name]["train"]["exit_signal_handler"], reports[name]["train"]["exit_signal"]) == (True, 10)
    assert (reports["lora"]["checkpoint"]["async_save"], reports["full-cp2"]["checkpoint"]["async_save"]) == (
        True,
        False,
    )


def test_the_sft_data_is_our_jsonl_packed_to_the_sequence_in_the_run_directory(reports: dict[str, Any]) -> None:
    dataset = reports["lora"]["dataset"]
    assert dataset["type"] == "GPTSFTDatasetConfig" and dataset["hf_dataset"] is None  # not SQuAD from the Hub
    assert dataset["dataset_root"].endswith("/lora/sft-data")
    assert (dataset["seq_length"], dataset["packed_sequence_size"], dataset["pad_seq_to_mult"]) == (256, 256, 1)
    assert (reports["full-cp2"]["dataset"]["pad_seq_to_mult"], reports["full-cp2"]["model"]["context"]) == (4, 2)
    assert reports["full-cp2"]["model"]["calculate_per_token_loss"] is True


def test_bridges_dataset_code_reads_our_jsonl_with_the_loss_on_the_response_only(reports: dict[str, Any]) -> None:
    data = reports["lora"]["data"]
    assert (data["train_type"], data["valid_type"], data["test"]) == (
        "GPTSFTPackedParquetDataset",
        "GPTSFTPackedParquetDataset",
        False,
    )
    assert data["train_samples"] > 0 and data["valid_samples"] > 0
    # The first validation row (the fixture holds out the first tenth): prompt untrained, response + EOD trained.
    assert data["row_prompt"] == ROWS[0]["input"]
    assert data["row_response"].strip().startswith(ROWS[0]["output"]) and data["row_ends_with_eod"]


def test_packed_samples_keep_their_attention_and_positions_to_themselves(reports: dict[str, Any]) -> None:
    data = reports["lora"]["data"]
    boundaries = data["cu_seqlens_q"]
    assert data["packed_tokens"] == 256
    assert boundaries[0] == 0 and len(boundaries) > 2 and boundaries == sorted(boundaries)
    # One position restart per packed sample; the loss covers responses only, a fraction of the tokens.
    assert data["position_resets"] >= len(boundaries) - 1
    assert 0 < data["packed_loss_tokens"] < data["packed_tokens"]
