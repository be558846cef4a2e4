"""The Megatron Bridge entry point's own part: its config sections, how pretrain()'s exit reads, the recipe built from the
rendered HF config (the override, stop and exit logic it shares with nemo_pretrain.py is tests/launch/test_job_contract.py's;
Megatron Bridge itself is imported only inside the container, tests/launch/test_bridge_contract.py runs it against Megatron
Bridge's own code)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from launch.jobs import bridge_pretrain
from launch.jobs.bridge_pretrain import load_config, run_job, stop_of
from launch.jobs.job_contract import STOP_SIGNAL, StoppedOnSignal
from training import signals


def test_pretrains_sys_exit_0_is_the_signal_stop_and_any_other_status_a_failure() -> None:
    # Megatron Bridge's train loop ends a signal stop with sys.exit(exit_code), exit_code 0 (train.py).
    assert isinstance(stop_of(SystemExit(0)), StoppedOnSignal)
    assert isinstance(stop_of(SystemExit(None)), StoppedOnSignal)
    assert str(stop_of(SystemExit(16))) == "pretrain exited with status 16"


def test_a_config_missing_sections_is_named(tmp_path: Path) -> None:
    path = tmp_path / "bridge.yaml"
    path.write_text(yaml.safe_dump({"recipe": "llama3_8b_pretrain_config"}))
    with pytest.raises(ValueError, match="missing recipe_module, hf_model_id, hf_model_root, overrides, data"):
        load_config(path)


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


def test_a_refusal_before_training_is_a_config_error_on_every_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_PROCID", "3")  # not rank 0: an error is still reported

    def refuse(config: dict[str, Any]) -> Any:
        raise AssertionError("eval_global_batch_size (16) must be divisible by ...")

    config = str(_config(tmp_path))
    assert run_job(config, refuse) == signals.EXIT_CONFIG_ERROR
    assert _status(tmp_path)["reason"] == (
        "configuration error: AssertionError: eval_global_batch_size (16) must be divisible by ..."
    )
    # A finish is rank 0's to report: rank 3 leaves the file as it is.
    assert run_job(config, lambda config: lambda: None) == signals.EXIT_OK
    assert _status(tmp_path)["exit_code"] == signals.EXIT_CONFIG_ERROR
    monkeypatch.setenv("SLURM_PROCID", "0")
    assert run_job(config, lambda config: lambda: None) == signals.EXIT_OK
    assert _status(tmp_path)["reason"] == "finished"


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
    assert container.train.exit_signal == STOP_SIGNAL
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


@pytest.mark.parametrize("paths", [["/d/a"], [0.75, "/d/a", 0.25, "/d/b"], [3, "/d/a", 1, "/d/b", 2.5, "/d/c"]])
def test_the_blend_list_is_read_as_megatron_cores_parser_reads_it(paths: list[Any]) -> None:
    from megatron.core.datasets.utils import get_blend_from_list

    assert bridge_pretrain.blend_of(paths) == get_blend_from_list(paths)
