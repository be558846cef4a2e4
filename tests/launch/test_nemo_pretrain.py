"""The NeMo 2 entry point's own part: its config sections and its run_job (the override, stop and exit logic it
shares with bridge_pretrain.py is tests/launch/test_job_contract.py's; NeMo itself is imported only in the container,
tests/launch/test_nemo_contract.py runs it against NeMo's own code)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from launch.jobs.job_contract import StoppedOnSignal
from launch.jobs.nemo_pretrain import load_config, run_job
from training import signals


def test_a_config_missing_sections_is_named(tmp_path: Path) -> None:
    path = tmp_path / "nemo.yaml"
    path.write_text(yaml.safe_dump({"recipe": "llama3_8b", "name": "x"}))
    with pytest.raises(ValueError, match="missing log_dir, num_nodes, gpus_per_node, overrides, data"):
        load_config(path)


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "nemo-config.yaml"
    config: dict[str, Any] = {key: {} for key in ("overrides", "data")}
    config.update(recipe="llama3_8b", name="r", log_dir="/l", num_nodes=1, gpus_per_node=8)
    config["exit_status_file"] = str(tmp_path / "exit_status.json")
    path.write_text(yaml.safe_dump(config))
    return path


def _status(tmp_path: Path) -> dict[str, Any]:
    return json.loads((tmp_path / "exit_status.json").read_text())


def _trains(outcome: BaseException | None) -> Callable[[dict[str, Any]], Callable[[], None]]:
    def configure(config: dict[str, Any]) -> Callable[[], None]:
        assert config["recipe"] == "llama3_8b"  # the entry point's own config reader

        def train() -> None:
            if outcome is not None:
                raise outcome

        return train

    return configure


def test_the_entry_points_run_job_reads_its_config_and_reports_the_ending(tmp_path: Path) -> None:
    # The trainer's PreemptionCallback stop is raised as StoppedOnSignal by _configure's train().
    assert run_job(str(_config(tmp_path)), _trains(StoppedOnSignal())) == signals.EXIT_REQUEUE
    assert _status(tmp_path)["reason"] == "stopped on SIGUSR1 after a checkpoint"
    assert run_job(str(_config(tmp_path)), _trains(None)) == signals.EXIT_OK
    assert _status(tmp_path)["reason"] == "finished"


def test_a_config_without_its_sections_is_a_config_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "nemo-config.yaml"
    path.write_text(yaml.safe_dump({"recipe": "llama3_8b"}))
    assert run_job(str(path), _trains(None)) == signals.EXIT_CONFIG_ERROR
    assert "nemo_pretrain: configuration error: ValueError: " in capsys.readouterr().err
