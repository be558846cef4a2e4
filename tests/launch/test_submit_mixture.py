"""llm-submit with a data mixture: every dataset checked, absolute in the rendered config, each backend's syntax."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from megatron.core.datasets.utils import get_blend_from_list

from launch.neuron import nxdt_config
from launch.nxdt_contract import contract_problems
from launch.submit import main, parse_options, render, write
from slurm.target import resolve_target
from spec import load_spec
from tests.launch.conftest import write_job, write_mixture_job
from tests.training.jobs import prepare_demo_subset, prepare_second_source
from training.config import load_job_config
from training.models.registry import get_model_args
from training.prepare import prepare_dataset

REPO = Path(__file__).resolve().parents[2]
TRN1_SPEC = REPO / "spec" / "examples" / "trn1-neuron.yaml"
NEURON_CONFIGS = REPO / "launch" / "jobs" / "configs"


@pytest.fixture(scope="module")
def sources(demo_data: str) -> tuple[str, str]:
    """The demo data and a second source prepared with its tokenizer."""
    return demo_data, prepare_second_source(demo_data)


def mixture_job(path: Path, datasets: list[tuple[float, str]], **data: Any) -> Path:
    return write_mixture_job(path, datasets, data=data)


def argv(config: Path, run_dir: Path, backend: str = "fsdp", *extra: str) -> list[str]:
    return ["--backend", backend, "--model", str(config), "--nodes", "2", "--run-dir", str(run_dir), *extra]


def fails(capsys: pytest.CaptureFixture[str], args: list[str]) -> str:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    return err.strip()


def test_a_mixture_needs_no_data_prefix_and_the_run_records_it_with_absolute_prefixes(
    sources: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = sources
    monkeypatch.chdir(Path(second).parent)  # prefixes are relative to the working directory, as in the job YAML
    config = mixture_job(tmp_path / "mix.yaml", [(0.7, first), (0.3, Path(second).name)])
    run_dir = tmp_path / "runs" / "mix"
    write(render(parse_options([*argv(config, run_dir), "--local"]), "t"))
    recorded = yaml.safe_load((run_dir / "job-config.yaml").read_text())["data"]
    assert recorded["datasets"] == [
        {"prefix": str(Path(first).resolve()), "weight": 0.7},
        {"prefix": str(Path(second).resolve()), "weight": 0.3},
    ]
    assert recorded["prefix"] is None


def test_data_prefix_with_a_mixture_or_neither_is_one_line(
    sources: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = sources
    config = mixture_job(tmp_path / "mix.yaml", [(1, first), (1, second)])
    err = fails(capsys, [*argv(config, tmp_path / "r", "fsdp", "--local", "--data-prefix", first), "--dry-run"])
    assert err.startswith(f"error: --data-prefix: {first!r}: the job YAML {config} lists data.datasets (a mixture)")
    single = write_job(tmp_path / "single.yaml")
    err = fails(capsys, [*argv(single, tmp_path / "r", "fsdp", "--local"), "--dry-run"])
    assert err == f"error: --data-prefix: required: the job YAML {single} lists no data.datasets mixture"


def test_every_dataset_of_the_mixture_is_checked(
    sources: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, _ = sources
    missing = str(tmp_path / "gone_text_document")
    config = mixture_job(tmp_path / "mix.yaml", [(1, first), (1, missing)])
    err = fails(capsys, [*argv(config, tmp_path / "r", "fsdp", "--local"), "--dry-run"])
    assert err == f"error: --model: data.datasets[1].prefix: {missing!r} has no .bin or .idx file ({missing}.bin)"

    (tmp_path / "other").mkdir()
    other = prepare_demo_subset(tmp_path / "other", documents=40)  # its own tokenizer, trained on other text
    config = mixture_job(tmp_path / "mix2.yaml", [(1, first), (1, other)])
    err = fails(capsys, [*argv(config, tmp_path / "r2", "fsdp", "--local"), "--dry-run"])
    assert err.startswith(f"error: --model: data.datasets[1].prefix: {other}: tokenizer_sha256 ")
    assert "prepare every dataset of a mixture with one tokenizer" in err


def test_nemo_2_and_megatron_bridge_get_megatrons_weighted_paths(
    sources: tuple[str, str], tmp_path: Path, nemo2507_spec: Path
) -> None:
    first, second = sources
    config = mixture_job(tmp_path / "mix.yaml", [(3, first), (1, second)], global_batch_size=64)
    blend = [3.0, str(Path(first).resolve()), 1.0, str(Path(second).resolve())]
    write(render(parse_options(argv(config, tmp_path / "bridge", "nemo")), "t"))
    bridge = yaml.safe_load((tmp_path / "bridge" / "bridge-config.yaml").read_text())
    assert bridge["data"]["paths"] == blend
    write(render(parse_options([*argv(config, tmp_path / "nemo2", "nemo"), "--spec", str(nemo2507_spec)]), "t"))
    nemo = yaml.safe_load((tmp_path / "nemo2" / "nemo-config.yaml").read_text())
    assert nemo["data"]["paths"] == blend


def test_nxdt_gets_its_data_prefix_blend_and_the_contract_accepts_it() -> None:
    job = load_job_config(NEURON_CONFIGS / "neuron-pythia-6.9b.yaml").with_overrides(
        **{
            "data.prefix": None,
            "data.datasets": [{"prefix": "/fsx/data/web_text_document", "weight": 0.8},
                              {"prefix": "/fsx/data/code_text_document", "weight": 0.2}],
        }
    )  # fmt: skip
    config = nxdt_config(
        job,
        get_model_args("pythia-6.9b"),
        resolve_target(load_spec(str(TRN1_SPEC)), "neuron", None, None),
        4,
        Path("/fsx/runs/mix"),
        "/fsx/tok",
        8,
        1,
    )
    assert config["data"]["data_prefix"] == [0.8, "/fsx/data/web_text_document", 0.2, "/fsx/data/code_text_document"]
    assert contract_problems(config) == []
    # NxDT's megatron data module reads data_prefix as Megatron's blend list; megatron-core's own parser agrees
    paths, weights = get_blend_from_list(config["data"]["data_prefix"])
    assert (paths, weights) == (["/fsx/data/web_text_document", "/fsx/data/code_text_document"], [0.8, 0.2])


def test_the_trainers_validation_pass_counts_every_datasets_held_out_samples_together(
    sources: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, _ = sources
    short = tmp_path / "short.jsonl"  # 20 one-word documents: its 5 % held out cannot fill a 65-token sample
    short.write_text(
        "".join(f'{{"text": "word{n}"}}\n' for n in range(20))
        + "".join(f'{{"text": "{" ".join(["more words"] * 40)}"}}\n' for _ in range(4))
    )
    tokenizer = Path(first).parent / "demo_tokenizer.json"
    prefix = str(
        prepare_dataset([short], tmp_path / "short", tokenizer_path=tokenizer, show_progress=False).data_prefix
    )
    evaluating = {"eval_every": 10}
    config = write_mixture_job(tmp_path / "mix.yaml", [(0.9, first), (0.1, prefix)], train=evaluating)
    assert main([*argv(config, tmp_path / "r", "fsdp", "--local"), "--dry-run"]) == 0
    capsys.readouterr()

    huge = write_mixture_job(
        tmp_path / "huge.yaml", [(0.9, first), (0.1, prefix)], train=evaluating,
        data={"micro_batch_size": 512, "global_batch_size": 1024},
    )  # fmt: skip
    err = fails(capsys, [*argv(huge, tmp_path / "r2", "fsdp", "--local"), "--dry-run"])
    assert err.startswith("error: --model: data.datasets: the validation splits hold ")
    assert "fewer than one evaluation batch of 1024 (data-parallel size x micro-batch)" in err
