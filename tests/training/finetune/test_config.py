"""The job config's finetune: section (mode, init, LoRA settings), validated like every other section."""

from __future__ import annotations

from typing import Any

import pytest

from training.config import ConfigError, parse_job_config
from training.finetune.config import HF_LINEAR_MODULES

BASE: dict[str, Any] = {
    "model": {"name": "tiny", "vocab_size": 512},
    "data": {"prefix": "p", "seq_len": 64, "micro_batch_size": 1, "global_batch_size": 2},
    "train": {"max_steps": 2},
}


def _job(finetune: Any) -> Any:
    return parse_job_config({**BASE, "finetune": finetune})


def test_a_job_without_finetune_is_pretraining() -> None:
    assert parse_job_config(BASE).finetune is None


def test_lora_defaults_target_every_linear_layer_by_hugging_face_name() -> None:
    section = _job({"mode": "lora", "init": "/fsx/models/base"}).finetune
    assert section is not None and section.mode == "lora" and section.init == "/fsx/models/base"
    lora = section.lora_settings
    assert lora is not None and (lora.rank, lora.alpha, lora.dropout) == (16, 32, 0.0)
    assert lora.target_modules == HF_LINEAR_MODULES


@pytest.mark.parametrize(
    ("finetune", "line"),
    [
        ({"mode": "qlora", "init": "x"}, "config: finetune.mode: 'qlora' input should be 'full' or 'lora'"),
        ({"mode": "lora"}, "config: finetune.init: is required with model.name"),
        ({"mode": "lora", "init": "x", "lora": {"rank": 0}}, "config: finetune.lora.rank: "),
        (
            {"mode": "lora", "init": "x", "lora": {"target_modules": ["q_proj", "qkv"]}},
            "config: finetune.lora.target_modules: 'qkv' names no linear layer of a Llama block",
        ),
        ({"mode": "lora", "init": "x", "lora": {"target_modules": []}}, "config: finetune.lora.target_modules: "),
        ({"mode": "lora", "init": "x", "lora": {"dropout": 1.0}}, "config: finetune.lora.dropout: "),
    ],
)
def test_a_bad_finetune_section_is_one_line_naming_the_field(finetune: dict[str, Any], line: str) -> None:
    with pytest.raises(ConfigError) as error:
        _job(finetune)
    assert len(str(error.value).splitlines()) == 1
    assert str(error.value).startswith(line), str(error.value)
