"""One table of named shapes: a name resolves to the same shape in a job YAML, in `llm-plan --model` and in the
published benchmark tables."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from planner.job_config import read_job
from planner.plan import known_models
from training.config import ModelSection, resolve_model_args
from training.models.families import FAMILIES
from training.models.params import count_parameters
from training.models.registry import MODEL_CONFIGS, PUBLISHED_TOTAL_PARAMS

REPO = Path(__file__).resolve().parents[3]


def test_the_planner_and_the_trainer_read_one_table() -> None:
    assert known_models() is MODEL_CONFIGS


@pytest.mark.parametrize("name", ["mpt-7b", "llama3-70b", "megatron-gpt-1.7b", "llama2-7b"])
def test_a_name_means_one_shape_in_a_job_yaml_and_in_the_planner(tmp_path: Path, name: str) -> None:
    job = yaml.safe_load((REPO / "training/configs/llama3-8b.yaml").read_text(encoding="utf-8"))
    job["model"] = {"name": name}
    job["data"]["seq_len"] = min(job["data"]["seq_len"], MODEL_CONFIGS[name].max_seq_len)
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job), encoding="utf-8")
    assert resolve_model_args(ModelSection(name=name), data_vocab_size=None) == known_models()[name]
    assert read_job(path)[1] == known_models()[name]


def test_every_familys_shapes_are_in_the_table_smallest_first() -> None:
    flavors = {args.flavor for args in MODEL_CONFIGS.values()}
    assert flavors == set(FAMILIES)
    sizes = [count_parameters(args).total for args in MODEL_CONFIGS.values()]
    assert sizes == sorted(sizes)
    assert set(PUBLISHED_TOTAL_PARAMS) <= set(MODEL_CONFIGS)
