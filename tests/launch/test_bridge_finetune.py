"""`llm-submit --backend nemo` with a finetune: section: Megatron Bridge's SFT/PEFT recipe, its init, LoRA and SFT
data rendered (launch/bridge_finetune.py); bad input refused in one line; Neuron and NeMo 2 refuse in one line.
What Bridge makes of the rendered configs: tests/launch/test_bridge_finetune_contract.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from launch import submit
from slurm.errors import SubmitError
from tests.launch.conftest import nemo2507_spec_file, write_job
from tests.launch.sft_fixtures import hf_init, sft_dataset
from tests.launch.test_nemo_contract import LLAMA_JOB

TRN1_SPEC = Path(__file__).resolve().parents[2] / "spec" / "examples" / "trn1-neuron.yaml"


def finetune_job(mode: str, init: str, **lora: Any) -> dict[str, dict[str, Any]]:
    section: dict[str, Any] = {"mode": mode, "init": init}
    if lora:
        section["lora"] = lora
    return {**LLAMA_JOB, "finetune": section}


def render(tmp_path: Path, prefix: str, job: dict[str, Any], *extra: str, name: str = "ft") -> dict[str, Any]:
    config = write_job(tmp_path / f"{name}.yaml", **job)
    run_dir = tmp_path / name
    argv = ["--backend", "nemo", "--model", str(config), "--nodes", "2", "--data-prefix", prefix,
            "--run-dir", str(run_dir), *extra]  # fmt: skip
    submit.write(submit.render(submit.parse_options(argv), "llm-submit " + " ".join(argv)))
    rendered: dict[str, Any] = yaml.safe_load((run_dir / "bridge-config.yaml").read_text())
    return rendered


@pytest.fixture
def sft_prefix(tmp_path: Path, demo_data: str) -> str:
    return sft_dataset(tmp_path / "data", demo_data)


@pytest.fixture
def init_dir(tmp_path: Path) -> Path:
    return hf_init(tmp_path / "base", write_job(tmp_path / "shape.yaml", **LLAMA_JOB))


def test_lora_uses_bridges_peft_recipe_with_canonical_lora_on_the_hugging_face_names(
    tmp_path: Path, sft_prefix: str, init_dir: Path
) -> None:
    job = finetune_job("lora", str(init_dir), rank=8, alpha=16, dropout=0.1, target_modules=["q_proj", "v_proj",
                       "gate_proj", "down_proj"])  # fmt: skip
    config = render(tmp_path, sft_prefix, job)
    assert config["recipe"] == "llama3_8b_peft_config"
    assert config["overrides"]["checkpoint.pretrained_checkpoint"] == str(init_dir)
    # Resumed from the run's own checkpoints first (a requeue), the init only when there are none: as pretraining.
    assert config["overrides"]["checkpoint.load"] == config["overrides"]["checkpoint.save"]
    finetune = config["finetune"]
    assert finetune["lora"] == {"target_modules": ["linear_q", "linear_v", "linear_fc1_gate", "linear_fc2"],
                                "dim": 8, "alpha": 16.0, "dropout": 0.1}  # fmt: skip
    assert finetune["dataset_root"] == str(Path(sft_prefix).parent / "bridge")
    assert finetune["work_dir"] == str(tmp_path / "ft" / "sft-data")


def test_full_fine_tuning_uses_bridges_sft_recipe(tmp_path: Path, sft_prefix: str, init_dir: Path) -> None:
    config = render(tmp_path, sft_prefix, finetune_job("full", str(init_dir)))
    assert (config["recipe"], config["finetune"]["mode"], config["finetune"]["lora"]) == (
        "llama3_8b_sft_config",
        "full",
        None,
    )


def test_a_bridge_run_directory_initializes_from_its_checkpoints(tmp_path: Path, sft_prefix: str) -> None:
    run = tmp_path / "pretrain-run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "bridge-config.yaml").write_text("recipe: llama3_8b_pretrain_config\n")
    (run / "checkpoints" / "latest_checkpointed_iteration.txt").write_text("100\n")
    config = render(tmp_path, sft_prefix, finetune_job("lora", str(run)))
    assert config["overrides"]["checkpoint.pretrained_checkpoint"] == str(run / "checkpoints")


def test_context_parallel_sft_gets_bridges_per_token_loss_settings(
    tmp_path: Path, sft_prefix: str, init_dir: Path
) -> None:
    config = render(tmp_path, sft_prefix, finetune_job("lora", str(init_dir)), "--context-parallel", "2")
    assert config["overrides"]["model.calculate_per_token_loss"] is True
    assert config["overrides"]["ddp.average_in_collective"] is False
    assert config["finetune"]["pad_seq_to_mult"] == 4


def _refusal(tmp_path: Path, prefix: str, job: dict[str, Any], *extra: str) -> str:
    with pytest.raises(SubmitError) as error:
        render(tmp_path, prefix, job, *extra)
    assert len(str(error.value).splitlines()) == 1
    return str(error.value)


def test_a_missing_init_is_one_line(tmp_path: Path, sft_prefix: str) -> None:
    line = _refusal(tmp_path, sft_prefix, finetune_job("lora", str(tmp_path / "nowhere")))
    assert line.startswith(f"finetune.init: '{tmp_path / 'nowhere'}' is neither a Hugging Face directory")


def test_an_init_of_another_shape_is_one_line(tmp_path: Path, sft_prefix: str) -> None:
    base = hf_init(tmp_path / "other", write_job(tmp_path / "shape.yaml", **LLAMA_JOB), hidden_size=256)
    line = _refusal(tmp_path, sft_prefix, finetune_job("full", str(base)))
    assert line == (
        f"finetune.init: {base / 'config.json'} has hidden_size 256, the job's model has 128; "
        "set model.hf_checkpoint to the same directory"
    )


def test_a_dataset_without_bridges_jsonl_is_one_line(tmp_path: Path, demo_data: str, init_dir: Path) -> None:
    line = _refusal(tmp_path, demo_data, finetune_job("lora", str(init_dir)))
    assert line.startswith(f"--data-prefix: {demo_data}: no {Path(demo_data).parent / 'bridge' / 'training.jsonl'}")


def test_an_empty_split_is_one_line(tmp_path: Path, sft_prefix: str, init_dir: Path) -> None:
    (Path(sft_prefix).parent / "bridge" / "validation.jsonl").write_text("")
    line = _refusal(tmp_path, sft_prefix, finetune_job("lora", str(init_dir)))
    assert line.endswith("validation.jsonl is empty")


def test_micro_batches_above_one_are_refused_since_bridge_packs_one_sequence(
    tmp_path: Path, sft_prefix: str, init_dir: Path
) -> None:
    job = finetune_job("lora", str(init_dir))
    job = {**job, "data": {**job["data"], "micro_batch_size": 2, "global_batch_size": 32}}
    assert _refusal(tmp_path, sft_prefix, job).startswith("data.micro_batch_size: 2 must be 1 for a finetune job")


def test_nemo_2_has_no_finetune_path(tmp_path: Path, sft_prefix: str, init_dir: Path) -> None:
    spec = nemo2507_spec_file(tmp_path / "spec.yaml")
    line = _refusal(tmp_path, sft_prefix, finetune_job("lora", str(init_dir)), "--spec", str(spec))
    assert line.startswith("finetune: needs Megatron Bridge")


@pytest.mark.parametrize("mode", ["full", "lora"])
def test_neuron_refuses_a_finetune_section_saying_why(
    tmp_path: Path, sft_prefix: str, init_dir: Path, mode: str
) -> None:
    config = write_job(tmp_path / "n.yaml", **finetune_job(mode, str(init_dir)))
    argv = ["--backend", "neuron", "--model", str(config), "--nodes", "1", "--data-prefix", sft_prefix,
            "--run-dir", str(tmp_path / "n"), "--spec", str(TRN1_SPEC)]  # fmt: skip
    with pytest.raises(SubmitError) as error:
        submit.render(submit.parse_options(argv), "llm-submit")
    line = str(error.value)
    assert len(line.splitlines()) == 1
    assert line.startswith(f"finetune.mode: '{mode}' is not supported on --backend neuron: the recorded NxDT contract")


def test_a_finetune_of_a_family_without_bridges_sft_recipe_is_one_line(tmp_path: Path, sft_prefix: str) -> None:
    # Bridge's SFT/PEFT recipes used here are Llama's: a Qwen3 job's pretraining recipe is no SFT recipe.
    job = {**finetune_job("full", str(tmp_path / "nowhere")), "model": {"name": "qwen3-tiny", "vocab_size": "data"}}
    line = _refusal(tmp_path, sft_prefix, job)
    assert line == "finetune: model flavor 'qwen3' has no Megatron Bridge SFT recipe here (llama only)"
