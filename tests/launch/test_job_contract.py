"""What the two NeMo Framework entry points share (launch/jobs/job_contract.py): the rendered config they read,
the dotted overrides they apply and the exit status they report to the batch script. The entry points run by path
inside the container, where only their own directory is importable: they import job_contract as a sibling there."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from cluster import payload
from launch.jobs import job_contract
from launch.jobs.job_contract import OverrideError, StoppedOnSignal, apply_overrides, load_config, run_job
from training import signals

REPO = Path(__file__).resolve().parents[2]
JOBS = REPO / "launch" / "jobs"
REQUIRED = ("recipe", "overrides", "data")


def _target() -> SimpleNamespace:
    return SimpleNamespace(
        model=SimpleNamespace(config=SimpleNamespace(num_layers=32, hidden_size=4096)),
        trainer=SimpleNamespace(max_steps=100, strategy=SimpleNamespace(tensor_model_parallel_size=1)),
    )


def test_overrides_set_existing_fields() -> None:
    target = _target()
    apply_overrides(target, {"model.config.num_layers": 4, "trainer.strategy.tensor_model_parallel_size": 2})
    assert target.model.config.num_layers == 4 and target.trainer.strategy.tensor_model_parallel_size == 2


@pytest.mark.parametrize(
    ("dotted", "what", "message"),
    [
        (
            "model.config.num_layer",
            "recipe",
            "override 'model.config.num_layer': the recipe has no 'model.config.num_layer'",
        ),
        ("optim.lr", "recipe", "the recipe has no 'optim'"),
        ("optim.lr", "config", "the config has no 'optim'"),
    ],
)
def test_a_misspelled_override_fails_instead_of_adding_a_field(dotted: str, what: str, message: str) -> None:
    target = _target()
    with pytest.raises(OverrideError, match=message):
        apply_overrides(target, {dotted: 1}, what)
    assert not hasattr(target, "optim") and not hasattr(target.model.config, "num_layer")


def test_a_config_missing_sections_is_named(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({"recipe": "llama3_8b"}))
    with pytest.raises(ValueError, match=r"job\.yaml: missing overrides, data"):
        load_config(path, REQUIRED)


def test_exit_codes_and_the_stop_signal_match_the_trainers_contract() -> None:
    # The container runs the entry points without the repo's packages, so these repeat training/signals.py's.
    assert (job_contract.EXIT_OK, job_contract.EXIT_FAILED) == (signals.EXIT_OK, 1)
    assert (job_contract.EXIT_CONFIG_ERROR, job_contract.EXIT_REQUEUE) == (
        signals.EXIT_CONFIG_ERROR,
        signals.EXIT_REQUEUE,
    )
    assert job_contract.STOP_SIGNAL.name == "SIGUSR1"


def _config(tmp_path: Path) -> str:
    path = tmp_path / "job.yaml"
    config = {"recipe": "r", "overrides": {}, "data": {}, "exit_status_file": str(tmp_path / "exit_status.json")}
    path.write_text(yaml.safe_dump(config))
    return str(path)


def _load(path: str) -> dict[str, Any]:
    return load_config(path, REQUIRED)


def _status(tmp_path: Path) -> dict[str, Any]:
    return json.loads((tmp_path / "exit_status.json").read_text())


def _trains(outcome: BaseException | None) -> Callable[[dict[str, Any]], Callable[[], None]]:
    def configure(config: dict[str, Any]) -> Callable[[], None]:
        def train() -> None:
            if outcome is not None:
                raise outcome

        return train

    return configure


@pytest.mark.parametrize(
    ("outcome", "code", "reason"),
    [
        (None, signals.EXIT_OK, "finished"),
        (StoppedOnSignal(), signals.EXIT_REQUEUE, "stopped on SIGUSR1 after a checkpoint"),
        (RuntimeError("NCCL error: unhandled system error"), 1, "training failed: RuntimeError: NCCL error: unhandled system error"),
    ],
)  # fmt: skip
def test_how_training_ends_is_the_exit_status_the_batch_script_reads(
    tmp_path: Path, outcome: BaseException | None, code: int, reason: str
) -> None:
    assert run_job(_config(tmp_path), _load, _trains(outcome), "entry") == code
    assert (_status(tmp_path)["exit_code"], _status(tmp_path)["reason"]) == (code, reason)
    assert _status(tmp_path)["step"] is None


def test_a_failure_while_configuring_is_a_config_error_on_every_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SLURM_PROCID", "3")  # not rank 0: an error is still reported

    def configure(config: dict[str, Any]) -> Callable[[], None]:
        raise ValueError("Combination of parameters every_n_train_steps=20 and train_time_interval=0:15:00")

    assert run_job(_config(tmp_path), _load, configure, "nemo_pretrain") == signals.EXIT_CONFIG_ERROR
    reason = "configuration error: ValueError: Combination of parameters every_n_train_steps=20 and train_time_interval=0:15:00"
    assert _status(tmp_path)["reason"] == reason
    assert f"nemo_pretrain: {reason}" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir() if "partial" in p.name] == []


def test_an_unreadable_config_is_a_config_error_without_a_status_file(tmp_path: Path) -> None:
    assert run_job(str(tmp_path / "absent.yaml"), _load, _trains(None), "entry") == signals.EXIT_CONFIG_ERROR
    assert list(tmp_path.iterdir()) == []


def test_a_stop_to_requeue_is_written_by_every_rank_and_a_finish_by_rank_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first rank to exit with EXIT_REQUEUE makes srun's --kill-on-bad-exit kill rank 0, which may not have
    # written yet (seen under load: the job requeued for "step exit status 143" with no status file).
    monkeypatch.setenv("SLURM_PROCID", "1")
    assert run_job(_config(tmp_path), _load, _trains(None), "entry") == signals.EXIT_OK
    assert not (tmp_path / "exit_status.json").exists()
    assert run_job(_config(tmp_path), _load, _trains(StoppedOnSignal()), "entry") == signals.EXIT_REQUEUE
    assert _status(tmp_path)["exit_code"] == signals.EXIT_REQUEUE


@pytest.mark.parametrize(
    ("entry", "config", "missing"),
    [
        ("nemo_pretrain.py", {"recipe": "llama3_8b", "name": "r", "log_dir": "/l", "num_nodes": 1, "gpus_per_node": 8},
         "fiddle"),
        ("bridge_pretrain.py", {"recipe_module": "megatron.bridge.recipes.llama", "recipe": "llama3_8b_pretrain_config",
                                "hf_model_id": "org/model", "hf_model_root": "/absent"}, "megatron"),
    ],
)  # fmt: skip
def test_an_entry_point_run_by_path_needs_only_its_directory(
    tmp_path: Path, entry: str, config: dict[str, Any], missing: str
) -> None:
    # As in the container: `python launch/jobs/<entry>`, the repo's packages not importable. The framework is
    # absent here, so the job gets as far as configuring it and reports a configuration error through job_contract.
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    for name in (entry, "job_contract.py"):
        shutil.copy(JOBS / name, jobs / name)
    status = tmp_path / "exit_status.json"
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({**config, "overrides": {}, "data": {}, "exit_status_file": str(status)}))
    result = subprocess.run(
        [sys.executable, "-E", "-s", str(jobs / entry), "--config", str(path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == signals.EXIT_CONFIG_ERROR, result.stderr
    # 'megatron' or 'megatron.bridge', as the host has Megatron Core or not
    reason = json.loads(status.read_text())["reason"]
    assert reason.startswith(f"configuration error: ModuleNotFoundError: No module named '{missing}"), reason


def test_the_head_node_payload_carries_job_contract_beside_the_entry_points() -> None:
    # The nodes run the entry points from the release the head node unpacks (WORKDIR, mounted into the container).
    members = {path.as_posix() for path in payload._members(REPO)}
    assert {f"launch/jobs/{name}" for name in ("nemo_pretrain.py", "bridge_pretrain.py", "job_contract.py")} <= members
