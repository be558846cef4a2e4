"""The Megatron Bridge entry point's override, stop and exit logic (Megatron Bridge itself is imported only inside the
container; tests/jobs/test_bridge_contract.py runs it against Megatron Bridge's own code)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from training import signals
from training.jobs import bridge_pretrain, nemo_pretrain
from training.jobs.bridge_pretrain import OverrideError, StoppedOnSignal, apply_overrides, load_config, run_job, stop_of


def _container() -> SimpleNamespace:
    return SimpleNamespace(
        model=SimpleNamespace(num_layers=32, tensor_model_parallel_size=1),
        train=SimpleNamespace(train_iters=100, exit_signal_handler=False),
    )


def test_overrides_set_existing_fields() -> None:
    container = _container()
    apply_overrides(container, {"model.num_layers": 4, "train.exit_signal_handler": True})
    assert container.model.num_layers == 4 and container.train.exit_signal_handler is True


@pytest.mark.parametrize(
    ("dotted", "message"),
    [("model.num_layer", "the config has no 'model.num_layer'"), ("optim.lr", "the config has no 'optim'")],
)
def test_a_misspelled_override_fails_instead_of_adding_a_field(dotted: str, message: str) -> None:
    with pytest.raises(OverrideError, match=message):
        apply_overrides(_container(), {dotted: 1})


def test_a_config_missing_sections_is_named(tmp_path: Path) -> None:
    path = tmp_path / "bridge.yaml"
    path.write_text(yaml.safe_dump({"recipe": "llama3_8b_pretrain_config"}))
    with pytest.raises(ValueError, match="missing recipe_module, hf_model_id, hf_model_root, overrides, data"):
        load_config(path)


def test_exit_codes_and_the_stop_signal_match_the_trainers_contract() -> None:
    # The container runs bridge_pretrain.py without the repo's packages, so it repeats these; they must agree.
    assert (bridge_pretrain.EXIT_OK, bridge_pretrain.EXIT_FAILED) == (signals.EXIT_OK, 1)
    assert (bridge_pretrain.EXIT_CONFIG_ERROR, bridge_pretrain.EXIT_REQUEUE) == (
        signals.EXIT_CONFIG_ERROR,
        signals.EXIT_REQUEUE,
    )
    assert bridge_pretrain.STOP_SIGNAL.name == "SIGUSR1"


def test_pretrains_sys_exit_0_is_the_signal_stop_and_any_other_status_a_failure() -> None:
    # Megatron Bridge's train loop ends a signal stop with sys.exit(exit_code), exit_code 0 (train.py).
    assert isinstance(stop_of(SystemExit(0)), StoppedOnSignal)
    assert isinstance(stop_of(SystemExit(None)), StoppedOnSignal)
    assert str(stop_of(SystemExit(16))) == "pretrain exited with status 16"


def _config(tmp_path: Path, **extra: Any) -> Path:
    root = tmp_path / "hf"
    (root / "org" / "model").mkdir(parents=True)
    (root / "org" / "model" / "config.json").write_text("{}")
    config = {
        "recipe_module": "json",
        "recipe": "loads",
        "hf_model_id": "org/model",
        "hf_model_root": str(root),
        "overrides": {},
        "data": {},
        "exit_status_file": str(tmp_path / "exit_status.json"),
        **extra,
    }
    path = tmp_path / "bridge-config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _status(tmp_path: Path) -> dict[str, Any]:
    return json.loads((tmp_path / "exit_status.json").read_text())


def _trains(outcome: BaseException | None) -> Any:
    def configure(config: dict[str, Any]) -> Any:
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
        (RuntimeError("NCCL timeout"), bridge_pretrain.EXIT_FAILED, "training failed: RuntimeError: NCCL timeout"),
    ],
)
def test_how_training_ends_is_the_exit_status_the_batch_script_reads(
    tmp_path: Path, outcome: BaseException | None, code: int, reason: str
) -> None:
    assert run_job(str(_config(tmp_path)), _trains(outcome)) == code
    assert (_status(tmp_path)["exit_code"], _status(tmp_path)["reason"]) == (code, reason)


def test_a_refusal_before_training_is_a_config_error_on_every_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_PROCID", "3")  # not rank 0: an error is still reported

    def refuse(config: dict[str, Any]) -> Any:
        raise AssertionError("eval_global_batch_size (16) must be divisible by ...")

    assert run_job(str(_config(tmp_path)), refuse) == signals.EXIT_CONFIG_ERROR
    assert _status(tmp_path)["reason"] == (
        "configuration error: AssertionError: eval_global_batch_size (16) must be divisible by ..."
    )


def test_the_recipe_is_built_from_the_rendered_hf_config_directory(tmp_path: Path) -> None:
    # The recipe function runs with hf_model_root as working directory: the model id names the rendered directory.
    seen: list[str] = []

    def recipe() -> _Bare:
        seen.append(str(Path("org/model/config.json").resolve()))
        return _Bare()

    module = SimpleNamespace(loads=recipe)
    config = load_config(_config(tmp_path))
    config["data"] = {"paths": [str(tmp_path / "d")], "split": "950,50,0", "seq_length": 8, "seed": 1, "tokenizer": "t"}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bridge_pretrain.importlib, "import_module", lambda name: module)
        container = bridge_pretrain.build_config(config)
    assert seen == [str(tmp_path / "hf" / "org" / "model" / "config.json")]
    assert container.dataset.blend == ([str(tmp_path / "d")], None)
    assert container.train.exit_signal == bridge_pretrain.STOP_SIGNAL
    assert (container.tokenizer.tokenizer_type, container.tokenizer.tokenizer_model) == ("HuggingFaceTokenizer", "t")


def test_a_missing_hf_config_is_named(tmp_path: Path) -> None:
    config = load_config(_config(tmp_path, hf_model_id="org/other"))
    with pytest.raises(FileNotFoundError, match=r"hf_model_root: no .*org/other/config\.json"):
        bridge_pretrain.build_config(config)


class _Bare:
    def __init__(self) -> None:
        self.dataset = SimpleNamespace()
        self.tokenizer = SimpleNamespace()
        self.train = SimpleNamespace()


@pytest.mark.parametrize("entry", [bridge_pretrain, nemo_pretrain])
def test_a_stop_to_requeue_is_written_by_every_rank_and_a_finish_by_rank_0(
    entry: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first rank to exit with EXIT_REQUEUE makes srun's --kill-on-bad-exit kill rank 0, which may not have
    # written yet (seen under load: the job requeued for "step exit status 143" with no status file).
    monkeypatch.setenv("SLURM_PROCID", "1")
    stopped, finished = tmp_path / "stopped.json", tmp_path / "finished.json"
    entry.write_exit_status(str(stopped), signals.EXIT_REQUEUE, "stopped on SIGUSR1 after a checkpoint")
    entry.write_exit_status(str(finished), signals.EXIT_OK, "finished")
    assert json.loads(stopped.read_text())["exit_code"] == signals.EXIT_REQUEUE
    assert not finished.exists()
