"""llm-submit's memory check is llm-plan's: the same figure for every shipped job YAML, on the same instance and node
count (the CPU demos on the local cluster: `llm-submit --local`, `llm-plan --instance local-cpu`), and Llama 2 70B
with LoRA renders for one p5 node (the 16-bytes-a-parameter check refused it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from launch.neuron import default_parallelism
from launch.submit import main as submit_main
from launch.submit import parse_options, render
from planner.plan import main as plan_main
from slurm.errors import SubmitError
from tests.launch.long_data import write_long_dataset

REPO = Path(__file__).resolve().parents[2]
TRN1_SPEC = REPO / "spec" / "examples" / "trn1-neuron.yaml"
LOCAL = "local-cpu"
# The CPU demos run where `make demo` and `make demo-finetune` run them: on the local cluster's two nodes.
CPU_DEMOS = ("tiny", "tiny-lora", "tiny-fp8")
# Every shipped job YAML, with its README/header command's backend and where it runs.
CASES = [
    *(
        (path, "fsdp", 2, [], LOCAL) if path.stem in CPU_DEMOS else (path, "fsdp", 1, [], "p5.48xlarge")
        for path in sorted((REPO / "training" / "configs").glob("*.yaml"))
    ),
    (REPO / "training" / "configs" / "llama3-8b.yaml", "nemo", 2, ["--tensor-parallel", "2"], "p5.48xlarge"),
    *(
        (path, "neuron", 4, [], "trn1.32xlarge")
        for path in sorted((REPO / "launch" / "jobs" / "configs").glob("neuron-*.yaml"))
    ),
]


@pytest.fixture(scope="module")
def long_data(tmp_path_factory: pytest.TempPathFactory, demo_data: str) -> str:
    manifest = json.loads(Path(f"{demo_data}.manifest.json").read_text())
    tokenizer = Path(demo_data).parent / manifest["tokenizer_file"]
    return write_long_dataset(tmp_path_factory.mktemp("long") / "long", tokenizer)


def _figure(message: str) -> float:
    """X of "fits: X GiB per device, ..." or "... does not fit: needs X GiB per device, ..."."""
    return float(message.split(" GiB per device")[0].split()[-1])


def _submit_figure(
    config: Path, backend: str, nodes: int, extra: list[str], instance: str, data: str, run_dir: Path
) -> float:
    argv = ["--backend", backend, "--model", str(config), "--nodes", str(nodes), "--data-prefix", data,
            "--run-dir", str(run_dir), *extra]  # fmt: skip
    if instance == LOCAL:
        argv.append("--local")
    elif backend == "neuron":
        argv += ["--spec", str(TRN1_SPEC)]
    try:
        return _figure(render(parse_options(argv), "t").notes[0])
    except SubmitError as error:
        return _figure(str(error))


def _plan_figure(
    config: Path, backend: str, nodes: int, extra: list[str], instance: str, data: str,
    capsys: pytest.CaptureFixture[str],
) -> float:  # fmt: skip
    layout = list(extra)
    if backend == "neuron":  # llm-submit's default NxDT layout for the model, given to llm-plan as flags
        tp, pp = default_parallelism(config.stem.removeprefix("neuron-"))
        layout = ["--tensor-parallel", str(tp), "--pipeline-parallel", str(pp)]
    argv = ["--model", str(config), "--instance", instance, "--nodes", str(nodes), "--backend", backend, *layout,
            "--data-prefix", data]  # fmt: skip
    assert plan_main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)["memory_gib_per_device"]


@pytest.mark.parametrize(("config", "backend", "nodes", "extra", "instance"), CASES,
                         ids=[f"{case[0].stem}-{case[1]}-{case[4]}" for case in CASES])  # fmt: skip
def test_llm_plan_and_llm_submit_give_the_same_memory_figure(
    config: Path, backend: str, nodes: int, extra: list[str], instance: str, long_data: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    submitted = _submit_figure(config, backend, nodes, extra, instance, long_data, tmp_path / "run")
    planned = _plan_figure(config, backend, nodes, extra, instance, long_data, capsys)
    assert submitted == round(planned, 1)


def test_llama2_70b_with_lora_renders_for_one_p5_node(
    long_data: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = REPO / "training" / "configs" / "llama2-70b-lora.yaml"
    argv = ["--backend", "fsdp", "--model", str(config), "--nodes", "1", "--data-prefix", long_data,
            "--run-dir", str(tmp_path / "run"), "--dry-run"]  # fmt: skip
    assert submit_main(argv) == 0
    out = capsys.readouterr().out
    assert "#SBATCH --nodes=1" in out and "--gpus-per-node=8" in out
    rendered = render(parse_options(argv), "t")
    assert rendered.notes[0].startswith("fits: ") and _figure(rendered.notes[0]) < 40
