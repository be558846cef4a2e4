from pathlib import Path

import pytest
import yaml

from tests.training.jobs import tiny_job
from training.config import (
    UNSET_EVERY_STEPS,
    CheckpointSection,
    ConfigError,
    load_job_config,
    pad_vocab,
    parse_job_config,
    resolve_model_args,
)
from training.models import get_model_args


def _errors(job: object) -> list[str]:
    with pytest.raises(ConfigError) as error:
        parse_job_config(job, source="job.yaml")
    return error.value.lines


def test_defaults_follow_the_fsdp_recipe() -> None:
    config = parse_job_config(tiny_job("data/x_text_document"))
    assert (config.optim.beta1, config.optim.beta2, config.optim.weight_decay, config.optim.min_lr_ratio) == (
        0.9,
        0.95,
        0.1,
        0.1,
    )
    assert config.parallel.mixed_precision == "auto"
    assert config.checkpoint.free_space_margin > 1.0


@pytest.mark.parametrize(
    ("change", "line"),
    [
        ({"optim": {"lr": 0}}, "job.yaml: optim.lr: 0 input should be greater than 0"),
        ({"optim": {"beta3": 0.9}}, "job.yaml: optim.beta3: 0.9 is not a known key (misspelled?)"),
        (
            {"parallel": {"activation_checkpoint": {"mode": "some"}}},
            "job.yaml: parallel.activation_checkpoint.mode: 'some'",
        ),
        ({"data": {"micro_batch_size": 3}}, "data.global_batch_size 8 is not a multiple of data.micro_batch_size 3"),
        ({"parallel": {"dp_shard": 0}}, "dp_shard must be >= 1, or -1 for world size / dp_replicate"),
        (
            {"guards": {"loss_spike_factor": 0.5}},
            "job.yaml: guards.loss_spike_factor: 0.5 input should be greater than 1",
        ),
        ({"model": {"hf_checkpoint": "some/dir"}}, "give exactly one of model.name or model.hf_checkpoint"),
    ],
)
def test_each_problem_is_one_line_naming_field_and_value(change: dict, line: str) -> None:
    job = tiny_job("data/x_text_document")
    for section, values in change.items():
        job[section] = {**job.get(section, {}), **values}
    lines = _errors(job)
    assert any(line in found for found in lines), lines
    assert all("\n" not in found for found in lines)


def test_missing_sections_and_non_mappings() -> None:
    assert "job.yaml: data: None is required but missing" in _errors(
        {"model": {"name": "tiny"}, "train": {"max_steps": 1}}
    )
    assert _errors([1, 2]) == ["job.yaml: <config>: 'list' must be a mapping of sections"]


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"--config: '.*absent.yaml' cannot be read"):
        load_job_config(tmp_path / "absent.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: [unclosed\n")
    with pytest.raises(ConfigError, match=r"is not valid YAML at line 2"):
        load_job_config(bad)


def test_overrides_are_validated_like_the_file(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(tiny_job("data/x_text_document")))
    config = load_job_config(path)
    assert config.with_overrides(**{"train.max_steps": 7}).train.max_steps == 7
    with pytest.raises(ConfigError, match=r"train.max_steps: 0 input should be greater than or equal to 1"):
        config.with_overrides(**{"train.max_steps": 0})


def test_model_shape_from_name_overrides_and_dataset_vocabulary() -> None:
    config = parse_job_config(tiny_job("data/x_text_document"))
    args = resolve_model_args(config.model, data_vocab_size=500)
    assert (args.dim, args.n_layers, args.vocab_size) == (64, 2, 512)
    assert pad_vocab(50277) == 50304

    named = parse_job_config({**tiny_job("x"), "model": {"name": "llama3-8b"}}).model
    assert resolve_model_args(named, data_vocab_size=128000) == get_model_args("llama3-8b")
    with pytest.raises(
        ConfigError, match=r"model.vocab_size: 128256 is smaller than the dataset's vocabulary \(200000\)"
    ):
        resolve_model_args(named, data_vocab_size=200000)
    broken = parse_job_config({**tiny_job("x"), "model": {"name": "tiny", "n_heads": 5}}).model
    with pytest.raises(ConfigError, match=r"model.dim: 128 is not divisible by model.n_heads \(5\)"):
        resolve_model_args(broken, data_vocab_size=None)


def test_an_unknown_flavor_is_one_line_listing_the_registered_families() -> None:
    # The families are training/models/families.py's, not a list in the config schema.
    with pytest.raises(ConfigError, match=r"^config: model.flavor: 'gpt2' is not one of llama, neox, qwen3, mixtral$"):
        section = parse_job_config({**tiny_job("x"), "model": {"name": "tiny", "flavor": "gpt2"}}).model
        resolve_model_args(section, data_vocab_size=None)


def test_hf_checkpoint_shape_comes_from_its_config_json(tmp_path: Path) -> None:
    from training.models.hf import hf_config

    (tmp_path / "config.json").write_text(__import__("json").dumps(hf_config(get_model_args("pythia-6.9b"))))
    section = parse_job_config({**tiny_job("x"), "model": {"hf_checkpoint": str(tmp_path)}}).model
    assert resolve_model_args(section, data_vocab_size=50277) == get_model_args("pythia-6.9b")
    missing = parse_job_config({**tiny_job("x"), "model": {"hf_checkpoint": str(tmp_path / "nope")}}).model
    with pytest.raises(ConfigError, match=r"model.hf_checkpoint: '.*nope/config.json' cannot be read"):
        resolve_model_args(missing, data_vocab_size=None)


@pytest.mark.parametrize(
    "content",
    [
        b"model:\n  name: caf\xe9\n",
        "model:\n  name: tiny\n".encode("utf-16"),
        (
            "a0: &a0 [lol]\n" + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 12))
        ).encode(),
    ],
    ids=["latin-1", "utf-16", "alias-bomb"],
)
def test_a_job_config_that_is_not_utf8_or_an_alias_bomb_is_one_line_naming_the_file(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "job.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as caught:
        load_job_config(path)
    (line,) = str(caught.value).splitlines()
    assert f"--config: '{path}' " in line


def test_an_hf_checkpoint_config_json_that_is_not_utf8_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_bytes('{"model_type": "llama"}'.encode("utf-16"))
    section = parse_job_config({**tiny_job("x"), "model": {"hf_checkpoint": str(tmp_path)}}).model
    with pytest.raises(ConfigError, match=r"model.hf_checkpoint: '.*config.json' is not UTF-8 text \(byte 0xff"):
        resolve_model_args(section, data_vocab_size=None)


@pytest.mark.parametrize("value", [0, -5, "sometimes", 2.5, True])
def test_a_checkpoint_interval_of_0_or_any_non_interval_is_refused_in_one_line(value: object) -> None:
    job = tiny_job("data/x_text_document", checkpoint={"every": value})
    lines = _errors(job)
    assert len(lines) == 1 and lines[0].startswith(f"job.yaml: checkpoint.every: {value!r} "), lines
    assert "'off'" in lines[0]  # the explicit way to save only at the end and on a stop signal


def test_a_checkpoint_interval_is_a_number_off_or_unset() -> None:
    def section(every: object) -> CheckpointSection:
        job = tiny_job("data/x_text_document", checkpoint={"every": every})
        if every is None:
            del job["checkpoint"]["every"]
        return parse_job_config(job).checkpoint

    assert section(25).every == 25 and section(25).steps_between_saves() == 25
    assert section("off").steps_between_saves() is None  # only at the end and on a stop signal, as asked
    unset = section(None)
    assert unset.every is None and unset.steps_between_saves() == UNSET_EVERY_STEPS  # never 0 by accident
