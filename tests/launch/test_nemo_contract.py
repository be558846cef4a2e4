"""The rendered NeMo job against NeMo's own code (NeMo 2.4.0, the nemo:25.07 container's, in .nemo-venv): the
pinned choice cluster.containers.nemo_framework: nemo-25.07 (the default, Megatron Bridge: test_bridge_contract.py).

The job's config is rendered by `launch.submit` as on the head node; tests/launch/contracts/nemo_probe.py then
builds the recipe with nemo_pretrain.build_recipe (what the container runs) and lets fiddle construct the parts
NeMo and Lightning construct on a GPU node: ModelCheckpoint (which refuses two save triggers), the callbacks,
the Megatron strategy with its parallel sizes, the optimizer, and the data module on our .bin/.idx and tokenizer.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from launch import submit
from tests.launch.conftest import nemo2507_spec_file, write_job, write_mixture_job
from tests.training.jobs import prepare_second_source
from training.signals import EXIT_CONFIG_ERROR

REPO = Path(__file__).resolve().parents[2]
PROBE = REPO / "tests" / "launch" / "contracts" / "nemo_probe.py"
LLAMA_JOB: dict[str, dict[str, Any]] = {
    "model": {"name": "tiny", "flavor": "llama", "vocab_size": "data", "n_layers": 4, "dim": 128, "n_heads": 8,
              "n_kv_heads": 4, "ffn_dim": 384},
    "data": {"seq_len": 256, "micro_batch_size": 1, "global_batch_size": 16},
    "train": {"max_steps": 100, "eval_every": 50},
    "checkpoint": {"every": 20, "keep_last": 3},
}  # fmt: skip


DECLARED = {**LLAMA_JOB, "model": {**LLAMA_JOB["model"], "vocab_size": 1000}}


def _render(
    tmp_path: Path,
    demo_data: str,
    name: str,
    *extra: str,
    job: dict[str, dict[str, Any]] = LLAMA_JOB,
    mixture: list[tuple[float, str]] | None = None,
) -> Path:
    if mixture is None:
        config = write_job(tmp_path / f"{name}.yaml", **job)
        data = ["--data-prefix", demo_data]
    else:  # the job YAML lists the datasets; no --data-prefix
        config = write_mixture_job(tmp_path / f"{name}.yaml", mixture, **job)
        data = []
    run_dir = tmp_path / name
    spec = nemo2507_spec_file(tmp_path / f"{name}-spec.yaml")  # the pinned NeMo 2.4 choice, not the default
    argv = ["--backend", "nemo", "--model", str(config), "--nodes", "2", *data,
            "--run-dir", str(run_dir), "--spec", str(spec), *extra]  # fmt: skip
    options = submit.parse_options(argv)
    submit.write(submit.render(options, "python -m launch.submit " + " ".join(argv)))
    return run_dir / "nemo-config.yaml"


@pytest.fixture(scope="module")
def reports(nemo_python: Path, demo_data: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """One probe run (NeMo imports take most of a minute) over every rendered layout."""
    tmp_path = tmp_path_factory.mktemp("nemo-contract")
    second_source = prepare_second_source(demo_data)
    configs = {
        "default": _render(tmp_path, demo_data, "default"),
        "tp2-cp2": _render(tmp_path, demo_data, "tp2-cp2", "--tensor-parallel", "2", "--context-parallel", "2"),
        "pp2": _render(tmp_path, demo_data, "pp2", "--pipeline-parallel", "2"),
        # 1000 tokens declared, the demo tokenizer's 512 used: NeMo unset would train 512 padded to 512.
        "declared-1000-tp2": _render(tmp_path, demo_data, "declared-1000-tp2", "--tensor-parallel", "2", job=DECLARED),
        "mixture": _render(tmp_path, demo_data, "mixture", mixture=[(0.75, demo_data), (0.25, second_source)]),
    }
    result = subprocess.run(
        [str(nemo_python), str(PROBE), *map(str, configs.values())],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("NEMO-PROBE ")]
    assert result.returncode == 0 and lines, result.stderr[-4000:]
    return dict(zip(configs, json.loads(lines[-1].removeprefix("NEMO-PROBE ")), strict=True))


def test_every_part_the_job_builds_is_accepted_by_nemo_and_lightning(reports: dict[str, dict[str, Any]]) -> None:
    for name, report in reports.items():
        assert report["errors"] == {}, name


def test_checkpoints_are_triggered_by_steps_only(reports: dict[str, dict[str, Any]]) -> None:
    # Item 1: the recipe's 15-minute train_time_interval beside every_n_train_steps makes ModelCheckpoint raise.
    assert reports["default"]["checkpoint"] == {
        "every_n_train_steps": 20,
        "train_time_interval": None,
        "save_top_k": 3,
    }


@pytest.mark.parametrize(
    ("name", "sizes"),
    [
        ("default", (1, 1, 1, 1, False)),
        ("tp2-cp2", (2, 1, 2, 1, True)),
        ("pp2", (1, 2, 1, 1, False)),
    ],
)
def test_the_strategy_has_exactly_the_rendered_layout(
    reports: dict[str, dict[str, Any]], name: str, sizes: tuple[int, int, int, int, bool]
) -> None:
    # Item 2: llama3_8b's recipe defaults context parallelism to 2; the job must set every size itself.
    strategy = reports[name]["strategy"]
    assert (
        strategy["tensor"],
        strategy["pipeline"],
        strategy["context"],
        strategy["expert"],
        strategy["sequence_parallel"],
    ) == sizes
    trainer = reports[name]["trainer"]
    assert (trainer["num_nodes"], trainer["devices"]) == (2, 8)


def test_the_time_limit_reaches_nemos_preemption_callback_not_lightnings_requeue(
    reports: dict[str, dict[str, Any]],
) -> None:
    report = reports["default"]
    assert "PreemptionCallback" in report["callbacks"]
    assert report["preemption_signals"] == [10]  # SIGUSR1, what the batch script forwards
    # Lightning's SLURM requeue would run scontrol, which the container does not have.
    assert (report["strategy"]["environment"], report["strategy"]["auto_requeue"]) == ("SLURMEnvironment", False)


def test_data_module_reads_our_dataset_and_tokenizer(reports: dict[str, dict[str, Any]], demo_data: str) -> None:
    report = reports["default"]
    assert report["data"]["paths"] == [str(Path(demo_data).resolve())]
    assert report["data"]["split"] == "950,50,0"
    assert (report["data"]["seq_length"], report["data"]["global_batch_size"], report["data"]["micro_batch_size"]) == (
        256,
        16,
        1,
    )
    assert report["data"]["tokenizer_vocab"] == 512
    assert report["model"] == {"num_layers": 4, "hidden_size": 128, "seq_length": 256}


def test_a_mixture_reaches_nemos_data_module_as_megatrons_blend(
    reports: dict[str, dict[str, Any]], demo_data: str
) -> None:
    data = reports["mixture"]["data"]
    second = Path(demo_data).parent / "second_text_document"
    assert data["paths"] == [str(Path(demo_data).resolve()), str(second.resolve())]
    assert data["weights"] == [0.75, 0.25]
    assert reports["default"]["data"]["weights"] is None


def test_a_trainer_that_cannot_start_is_a_config_error_not_a_requeue(reports: dict[str, dict[str, Any]]) -> None:
    # On this CPU machine Lightning refuses accelerator='gpu' while the trainer is built: the job's verdict must be
    # a configuration error, which the batch script never requeues.
    report = reports["default"]
    assert report["run_job_exit"] == EXIT_CONFIG_ERROR
    assert report["exit_status"]["exit_code"] == EXIT_CONFIG_ERROR
    assert report["exit_status"]["reason"].startswith("configuration error: ")


@pytest.mark.parametrize(("name", "declared"), [("default", 512), ("declared-1000-tp2", 1000)])
def test_nemo_trains_the_declared_vocabulary_not_the_tokenizers(
    reports: dict[str, dict[str, Any]], name: str, declared: int
) -> None:
    report = reports[name]
    assert "model" not in report["errors"], report["errors"]
    assert (report["vocab_size"], report["data"]["tokenizer_vocab"]) == (declared, 512)
