"""bench/torchtitan_config.py through torchtitan 0.3.0's own code, in .torchtitan-venv: its ConfigManager (tyro) builds
our Trainer.Config with every setting the comparison varies, and its c4_test loader reads the corpus directory the
driver writes. This keeps the comparison from rotting against the release it names."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from bench.gpu_vs_torchtitan import torchtitan_corpus_dir, torchtitan_env
from bench.torchtitan_releases import release_named
from tests.environments import ready

REPO = Path(__file__).resolve().parents[2]
TORCHTITAN_VENV = REPO / ".torchtitan-venv"

CONFIG_PROBE = textwrap.dedent(
    """
    import json, sys
    from importlib.metadata import version
    from torchtitan.config.manager import ConfigManager

    config = ConfigManager().parse_args(sys.argv[1:])
    attention = config.model_spec.model.layers[0].attention.inner_attention
    print(json.dumps({
        "torchtitan": version("torchtitan"),
        "flavor": config.model_spec.flavor,
        "vocab_size": config.model_spec.model.vocab_size,
        "weight_tying": config.model_spec.model.enable_weight_tying,
        "n_layers": len(config.model_spec.model.layers),
        "attention": type(attention).__qualname__,
        "local_batch_size": config.training.local_batch_size,
        "seq_len": config.training.seq_len,
        "steps": config.training.steps,
        "mixed_precision_param": config.training.mixed_precision_param,
        "mixed_precision_reduce": config.training.mixed_precision_reduce,
        "compile": [config.compile.enable, config.compile.components],
        "activation_checkpoint": type(config.activation_checkpoint).__qualname__,
        "loss": [type(config.loss).__qualname__, type(config.loss.loss_fn).__qualname__],
        "dataset": [config.dataloader.dataset, config.dataloader.dataset_path],
        "checkpoint": config.checkpoint.enable,
        "hf_assets_path": config.hf_assets_path,
        "log_freq": config.metrics.log_freq,
    }))
    """
)

DATASET_PROBE = textwrap.dedent(
    """
    import json, sys
    from torchtitan.hf_datasets.text_datasets import _validate_dataset

    path, loader, process = _validate_dataset("c4_test", sys.argv[1])
    dataset = loader(path)
    print(json.dumps({"rows": len(dataset), "first": process(dataset[0])[:60]}))
    """
)


@pytest.fixture(scope="module")
def torchtitan_python() -> Path:
    """The isolated torchtitan environment, built or waited for."""
    return ready("torchtitan-venv") / "bin" / "python"


def _run(python: Path, probe: str, args: list[str], env: dict[str, str], tmp_path: Path) -> dict:
    child_env = {
        **os.environ,
        **env,
        "PYTHONPATH": str(REPO),
        "HF_HOME": str(tmp_path / "hf"),
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
    }
    completed = subprocess.run(
        [str(python), "-c", probe, *args], cwd=REPO, env=child_env, capture_output=True, text=True, timeout=600
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def _settings(tmp_path: Path, ac: str, attention: str) -> dict[str, str]:
    return torchtitan_env(
        corpus_dir=tmp_path / "corpus",
        tokenizer_dir=tmp_path / "tokenizer",
        dump_folder=tmp_path / "out",
        seq_len=4096,
        micro_batch=2,
        steps=30,
        ac=ac,
        attention=attention,
    )


@pytest.mark.parametrize(
    ("config_name", "ac", "attention"),
    [
        ("llama3_1b_bench", "none", "flex"),
        ("llama3_1b_bench_compile", "selective", "flex"),
        ("llama3_1b_bench_compile", "none", "varlen"),
    ],
)
def test_torchtitans_config_manager_builds_our_config(
    torchtitan_python: Path, tmp_path: Path, config_name: str, ac: str, attention: str
) -> None:
    args = ["--module", "bench.torchtitan_config", "--config", config_name]
    found = _run(torchtitan_python, CONFIG_PROBE, args, _settings(tmp_path, ac, attention), tmp_path)
    assert found["torchtitan"] == release_named("0.3.0").version
    assert (found["flavor"], found["vocab_size"], found["weight_tying"], found["n_layers"]) == ("1B", 128256, True, 16)
    assert found["attention"] == {"flex": "FlexAttention.Config", "varlen": "VarlenAttention.Config"}[attention]
    assert (found["local_batch_size"], found["seq_len"], found["steps"]) == (2, 4096, 30)
    assert (found["mixed_precision_param"], found["mixed_precision_reduce"]) == ("bfloat16", "float32")
    assert found["compile"] == [config_name.endswith("_compile"), ["model", "loss"]]
    assert found["activation_checkpoint"] == {"none": "NoneType", "selective": "SelectiveAC.Config"}[ac]
    assert found["loss"] == ["ChunkedLossWrapper.Config", "CrossEntropyLoss.Config"]
    assert found["dataset"] == ["c4_test", str(tmp_path / "corpus")]
    assert (found["checkpoint"], found["log_freq"]) == (False, 1)
    assert found["hf_assets_path"] == str(tmp_path / "tokenizer")


def test_command_line_overrides_go_through_tyro(torchtitan_python: Path, tmp_path: Path) -> None:
    args = ["--module", "bench.torchtitan_config", "--config", "llama3_1b_bench", "--training.steps", "7"]
    found = _run(torchtitan_python, CONFIG_PROBE, args, _settings(tmp_path, "none", "flex"), tmp_path)
    assert found["steps"] == 7


def test_a_setting_outside_the_choices_is_refused_naming_the_variable(torchtitan_python: Path, tmp_path: Path) -> None:
    env = {**os.environ, **_settings(tmp_path, "full", "flex"), "PYTHONPATH": str(REPO)}
    args = ["--module", "bench.torchtitan_config", "--config", "llama3_1b_bench"]
    completed = subprocess.run(
        [str(torchtitan_python), "-c", CONFIG_PROBE, *args], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert completed.returncode != 0
    assert "environment BENCH_TT_AC: 'full' is not one of none, selective" in completed.stderr


def test_torchtitans_local_loader_reads_the_corpus_directory_the_driver_writes(
    torchtitan_python: Path, tmp_path: Path
) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"text": f"document {i}", "source": "t"}) + "\n" for i in range(5)))
    directory = torchtitan_corpus_dir(corpus, tmp_path / "tt-corpus")
    found = _run(torchtitan_python, DATASET_PROBE, [str(directory)], {}, tmp_path)
    assert found == {"rows": 5, "first": "document 0"}
