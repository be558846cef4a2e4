"""The NeMo runner's override logic (the NeMo import itself only happens inside the container)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from training import signals
from training.jobs import nemo_pretrain
from training.jobs.nemo_pretrain import OverrideError, apply_overrides, load_config, run_job


def _recipe() -> SimpleNamespace:
    return SimpleNamespace(
        model=SimpleNamespace(config=SimpleNamespace(num_layers=32, hidden_size=4096)),
        trainer=SimpleNamespace(max_steps=100, strategy=SimpleNamespace(tensor_model_parallel_size=1)),
    )


def test_overrides_set_existing_fields() -> None:
    recipe = _recipe()
    apply_overrides(recipe, {"model.config.num_layers": 4, "trainer.strategy.tensor_model_parallel_size": 2})
    assert recipe.model.config.num_layers == 4 and recipe.trainer.strategy.tensor_model_parallel_size == 2


@pytest.mark.parametrize(
    ("dotted", "message"),
    [
        ("model.config.num_layer", "the recipe has no 'model.config.num_layer'"),
        ("optim.lr", "the recipe has no 'optim'"),
    ],
)
def test_a_misspelled_override_fails_instead_of_adding_a_field(dotted: str, message: str) -> None:
    with pytest.raises(OverrideError, match=message):
        apply_overrides(_recipe(), {dotted: 1})


def test_a_config_missing_sections_is_named(tmp_path: Path) -> None:
    path = tmp_path / "nemo.yaml"
    path.write_text(yaml.safe_dump({"recipe": "llama3_8b", "name": "x"}))
    with pytest.raises(ValueError, match="missing log_dir, num_nodes, gpus_per_node, overrides, data"):
        load_config(path)


def test_exit_codes_match_the_trainers_contract() -> None:
    # The container runs nemo_pretrain.py without the repo's packages, so it repeats these; they must agree.
    assert (nemo_pretrain.EXIT_CONFIG_ERROR, nemo_pretrain.EXIT_REQUEUE) == (
        signals.EXIT_CONFIG_ERROR,
        signals.EXIT_REQUEUE,
    )


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "nemo-config.yaml"
    config = {key: {} for key in ("overrides", "data")}
    config.update(recipe="llama3_8b", name="r", log_dir="/l", num_nodes=1, gpus_per_node=8)
    config["exit_status_file"] = str(tmp_path / "exit_status.json")
    path.write_text(yaml.safe_dump(config))
    return path


def _status(tmp_path: Path) -> dict:
    return yaml.safe_load((tmp_path / "exit_status.json").read_text())


def test_a_failure_while_configuring_is_a_config_error(tmp_path: Path) -> None:
    def configure(config: dict) -> None:
        raise ValueError("Combination of parameters every_n_train_steps=20 and train_time_interval=0:15:00")

    assert run_job(str(_config(tmp_path)), configure, lambda _: False) == signals.EXIT_CONFIG_ERROR
    assert _status(tmp_path)["reason"] == (
        "configuration error: ValueError: Combination of parameters every_n_train_steps=20 and "
        "train_time_interval=0:15:00"
    )


def test_a_failure_while_training_is_a_failure_and_a_stop_is_a_requeue(tmp_path: Path) -> None:
    def crashing() -> None:
        raise RuntimeError("NCCL error: unhandled system error")

    assert run_job(str(_config(tmp_path)), lambda _: crashing, lambda _: False) == 1
    assert _status(tmp_path)["exit_code"] == 1
    assert run_job(str(_config(tmp_path)), lambda _: lambda: "trainer", lambda t: t == "trainer") == 42
    assert _status(tmp_path) | {"time": 0} == {
        "exit_code": 42,
        "reason": "stopped on SIGUSR1 after a checkpoint",
        "step": None,
        "time": 0,
    }
    assert run_job(str(_config(tmp_path)), lambda _: lambda: "trainer", lambda t: False) == 0


def test_rank_zero_reports_the_end_and_every_rank_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_PROCID", "3")
    assert run_job(str(_config(tmp_path)), lambda _: lambda: None, lambda _: False) == 0
    assert not (tmp_path / "exit_status.json").exists()

    # srun --kill-on-bad-exit may kill rank 0 before it writes, if another rank fails first.
    def configure(config: dict) -> None:
        raise ModuleNotFoundError("No module named 'nemo_run'")

    assert run_job(str(_config(tmp_path)), configure, lambda _: False) == signals.EXIT_CONFIG_ERROR
    assert _status(tmp_path)["exit_code"] == signals.EXIT_CONFIG_ERROR
    assert [p.name for p in tmp_path.iterdir() if "partial" in p.name] == []
