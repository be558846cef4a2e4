"""The finetune: section: full or LoRA, where the weights start, the adapters' settings; one line per problem."""

import pytest

from tests.training.jobs import tiny_job
from training.config import ConfigError, parse_job_config
from training.finetune.config import LORA_TARGETS


def _job(**finetune: object) -> dict:
    return tiny_job("data/x_text_document", finetune=finetune)


def _errors(job: dict) -> list[str]:
    with pytest.raises(ConfigError) as error:
        parse_job_config(job, source="job.yaml")
    assert all("\n" not in line for line in error.value.lines)
    return error.value.lines


def test_lora_defaults_target_every_llama_projection() -> None:
    config = parse_job_config(_job(mode="lora", init="runs/pretrain"))
    assert config.finetune is not None and config.finetune.lora_settings is not None
    lora = config.finetune.lora_settings
    assert (lora.rank, lora.alpha, lora.dropout, lora.target_modules) == (16, 32.0, 0.0, LORA_TARGETS)
    assert config.init_from == "runs/pretrain"


def test_full_fine_tuning_has_no_adapters_and_starts_from_the_hf_checkpoint() -> None:
    job = _job(mode="full")
    job["model"] = {"hf_checkpoint": "models/base"}
    config = parse_job_config(job)
    assert config.finetune is not None and config.finetune.lora_settings is None
    assert config.init_from == "models/base"


def test_pretraining_has_no_start() -> None:
    assert parse_job_config(tiny_job("data/x_text_document")).init_from is None


@pytest.mark.parametrize(
    ("finetune", "line"),
    [
        ({"mode": "qlora", "init": "r"}, "job.yaml: finetune.mode: 'qlora'"),
        ({"mode": "lora", "init": "r", "lora": {"rank": 0}}, "job.yaml: finetune.lora.rank: 0 input should be"),
        ({"mode": "lora", "init": "r", "lora": {"alpha": -1}}, "job.yaml: finetune.lora.alpha: -1"),
        ({"mode": "lora", "init": "r", "lora": {"dropout": 1.0}}, "job.yaml: finetune.lora.dropout: 1.0"),
        ({"mode": "lora", "init": "r", "lora": {"ranks": 8}}, "job.yaml: finetune.lora.ranks: 8 is not a known key"),
        ({"mode": "lora", "init": "r", "lora": {"target_modules": []}}, "finetune.lora.target_modules: is empty"),
        (
            {"mode": "lora", "init": "r", "lora": {"target_modules": ["q_proj", "q_proj"]}},
            "finetune.lora.target_modules: ['q_proj'] named more than once",
        ),
        ({"mode": "full", "init": "r", "lora": {"rank": 4}}, "finetune.lora: is for finetune.mode 'lora'"),
        ({"mode": "lora"}, "finetune.init: is required with model.name"),
    ],
)
def test_each_finetune_problem_is_one_line_naming_the_field(finetune: dict, line: str) -> None:
    lines = _errors(_job(**finetune))
    assert any(line in found for found in lines), lines


def test_init_and_hf_checkpoint_must_agree() -> None:
    job = _job(mode="lora", init="models/other")
    job["model"] = {"hf_checkpoint": "models/base"}
    lines = _errors(job)
    assert any("finetune.init: 'models/other' differs from model.hf_checkpoint 'models/base'" in x for x in lines)
