from typing import Any

import pytest

from tests.training.jobs import tiny_job
from training.config import ConfigError, parse_job_config


def mixture(*datasets: Any, **data: Any) -> dict[str, Any]:
    job = tiny_job("unused")
    del job["data"]["prefix"]
    job["data"] = {**job["data"], "datasets": list(datasets), **data}
    return job


def errors(job: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_job_config(job, source="job.yaml")
    assert all("\n" not in line for line in caught.value.lines)
    return caught.value.lines


def test_a_job_lists_datasets_with_weights() -> None:
    config = parse_job_config(mixture({"prefix": "web_text_document", "weight": 3}, {"prefix": "code", "weight": 1}))
    assert config.data.blend == [(3.0, "web_text_document"), (1.0, "code")]
    assert config.data.first_prefix == "web_text_document" and config.data.prefix is None


def test_a_single_prefix_stays_valid_and_is_a_blend_of_one() -> None:
    config = parse_job_config(tiny_job("data/x_text_document"))
    assert config.data.blend == [(1.0, "data/x_text_document")] and config.data.datasets is None


@pytest.mark.parametrize(
    ("datasets", "line"),
    [
        ([{"prefix": "a", "weight": 0}], "job.yaml: data.datasets[0].weight: 0 input should be greater than 0"),
        ([{"prefix": "a", "weight": -2}], "job.yaml: data.datasets[0].weight: -2 input should be greater than 0"),
        ([{"prefix": "a", "weight": "lots"}], "job.yaml: data.datasets[0].weight: 'lots'"),
        ([{"prefix": "a", "weight": float("nan")}], "job.yaml: data.datasets[0].weight: nan"),
        ([{"prefix": "a"}], "job.yaml: data.datasets[0].weight: None is required but missing"),
        ([{"prefix": "", "weight": 1}], "job.yaml: data.datasets[0].prefix: ''"),
        ([{"prefix": "a", "weight": 1, "share": 2}], "job.yaml: data.datasets[0].share: 2 is not a known key"),
        ([{"prefix": "a", "weight": 1}, {"prefix": "a", "weight": 2}], "data.datasets[1].prefix: 'a' is listed twice"),
        ([], "data.datasets: empty; list at least one {prefix, weight}"),
    ],
)
def test_a_bad_dataset_is_one_line_naming_the_field_and_value(datasets: list[Any], line: str) -> None:
    lines = errors(mixture(*datasets))
    assert any(line in found for found in lines), lines


def test_a_prefix_and_datasets_together_or_neither_are_refused() -> None:
    both = mixture({"prefix": "a", "weight": 1}, prefix="b")
    assert any("give exactly one of data.prefix or data.datasets" in line for line in errors(both))
    neither = tiny_job("x")
    del neither["data"]["prefix"]
    assert any("give exactly one of data.prefix or data.datasets" in line for line in errors(neither))


def test_a_mixture_of_fine_tuning_data_is_refused() -> None:
    lines = errors(mixture({"prefix": "a", "weight": 1}, kind="sft"))
    assert any("data.datasets: a mixture needs data.kind pretrain, not 'sft'" in line for line in lines), lines
