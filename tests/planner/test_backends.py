"""--backend: each stack plans with its own fitted rates; docs/planner.md's figures are what the planner prints."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from planner.calibration import CALIBRATED
from planner.hardware import hardware
from planner.job import Job, PlanError, Software, backend_software
from planner.plan import main
from planner.step_time import estimate_step
from training.models.registry import get_model_args

ROOT = Path(__file__).resolve().parents[2]
LLAMA3_70B_FP8 = [
    "--model", "llama3-70b", "--instance", "p5.48xlarge", "--nodes", "8", "--seq", "8192", "--tensor-parallel", "4",
    "--pipeline-parallel", "4", "--pipeline-interleave", "5", "--global-batch", "128", "--precision", "fp8",
]  # fmt: skip


def _plan(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_docs_backend_table_is_what_the_planner_prints(capsys: pytest.CaptureFixture[str]) -> None:
    doc = (ROOT / "docs" / "planner.md").read_text()
    for backend in ("fsdp", "nemo"):
        row = next(line for line in doc.splitlines() if re.match(rf"\| {backend} \| [^|]+ \| [0-9.]+ \|", line))
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        report = _plan(capsys, *LLAMA3_70B_FP8, "--backend", backend)
        time = report["time_s"]
        assert report["backend"] == backend
        assert float(cells[2]) == pytest.approx(report["step_time_s"], abs=0.006)
        assert int(cells[3].replace(",", "")) == round(report["tokens_per_s_per_device"])
        assert float(cells[4].rstrip(" %")) == pytest.approx(100 * report["mfu"], abs=0.06)
        assert float(cells[5]) == pytest.approx(time["matmul"], abs=0.006)
        assert float(cells[6]) == pytest.approx(time["memory_bound"], abs=0.006)
        total, exposed = (float(value) for value in cells[7].split(" / "))
        assert (total, exposed) == (
            pytest.approx(time["tensor_parallel_comm"], abs=0.006),
            pytest.approx(time["tensor_parallel_exposed"], abs=0.006),
        )


def test_nemo_plans_the_same_job_faster_than_eager_pytorch() -> None:
    """The issue's first blind spot: one speed for both stacks. The same layout on Megatron Core now plans faster,
    for the reasons its rates say (fused kernels, TP overlap), not a flat factor."""
    model, node = get_model_args("llama3-8b"), hardware("p5.48xlarge")
    common = dict(model=model, hardware=node, nodes=2, seq_len=8192, micro_batch=1, tensor_parallel=2, global_batch=64)
    fsdp = estimate_step(Job(**common, software=Software(sharding="zero1")))  # type: ignore[arg-type]
    nemo = estimate_step(Job(**common, software=backend_software("nemo")))  # type: ignore[arg-type]
    assert nemo.step_s < fsdp.step_s
    assert nemo.memory_bound_s < fsdp.memory_bound_s
    assert nemo.tensor_parallel_exposed_s < fsdp.tensor_parallel_exposed_s == fsdp.tensor_parallel.seconds


def test_compile_plans_the_compiled_kernels(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--model", "llama3-8b", "--instance", "p5.48xlarge", "--nodes", "1", "--seq", "8192", "--micro-batch", "2"]
    eager, compiled = _plan(capsys, *argv), _plan(capsys, *argv, "--compile")
    assert (eager["kernels"], compiled["kernels"]) == ("eager", "compiled")
    assert compiled["time_s"]["memory_bound"] < eager["time_s"]["memory_bound"]
    ratio = CALIBRATED.elementwise_bytes_per_hidden["compiled"] / CALIBRATED.elementwise_bytes_per_hidden["eager"]
    assert ratio < 1


def test_a_job_yamls_compile_flag_is_planned(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (ROOT / "training" / "configs" / "llama3-8b.yaml").read_text()
    assert re.search(r"(?m)^  compile: true$", text)
    eager = tmp_path / "eager.yaml"
    eager.write_text(re.sub(r"(?m)^  compile: true$", "  compile: false", text))
    base = ["--instance", "p5.48xlarge", "--nodes", "4", "--seq", "8192"]
    assert _plan(capsys, "--model", "training/configs/llama3-8b.yaml", *base)["kernels"] == "compiled"
    assert _plan(capsys, "--model", str(eager), *base)["kernels"] == "eager"


def test_the_backend_defaults_to_the_instance(capsys: pytest.CaptureFixture[str]) -> None:
    trn = _plan(capsys, "--model", "neox-20b", "--instance", "trn1.32xlarge", "--nodes", "4", "--seq", "2048",
                "--tensor-parallel", "8", "--pipeline-parallel", "4", "--global-batch", "1024")  # fmt: skip
    assert (trn["backend"], trn["layout"]["sharding"]) == ("neuron", "zero1")
    gpu = _plan(capsys, "--model", "llama3-8b", "--instance", "p5.48xlarge", "--nodes", "1", "--seq", "8192")
    assert (gpu["backend"], gpu["layout"]["sharding"]) == ("fsdp", "fsdp")
    nemo = _plan(capsys, "--model", "llama3-8b", "--instance", "p5.48xlarge", "--nodes", "1", "--seq", "8192",
                 "--backend", "nemo")  # fmt: skip
    assert nemo["layout"]["sharding"] == "zero1"


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--instance", "trn1.32xlarge", "--backend", "fsdp"], "--backend: 'fsdp' does not run on trn1.32xlarge"),
        (["--instance", "p5.48xlarge", "--backend", "neuron"], "--backend: 'neuron' does not run on p5.48xlarge"),
        (["--instance", "p5.48xlarge", "--backend", "nemo", "--compile"], "--compile: True applies to backend fsdp"),
        (["--instance", "p5.48xlarge", "--backend", "megatron"], "--backend: invalid choice: 'megatron'"),
    ],
)
def test_a_backend_the_instance_cannot_run_is_one_line(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["--model", "llama3-8b", "--nodes", "1", "--seq", "8192", *argv])
    assert caught.value.code == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err


def test_software_refuses_an_unknown_backend() -> None:
    with pytest.raises(PlanError, match="backend: 'megatron' is not one of fsdp, nemo, neuron"):
        Job(get_model_args("1b"), hardware("p5.48xlarge"), 1, 2048, 1, software=Software(backend="megatron"))  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["fsdp", "nemo2", "bridge", "neuron"])
def test_each_backends_defaults_make_a_software_the_planner_takes(name: str) -> None:
    from slurm.backends import BACKENDS

    software = backend_software(name)
    assert software.problems() == [] and software.backend == BACKENDS[name].stack


def test_nemo2_and_bridge_each_plan_with_what_their_job_configures() -> None:
    # NeMo 2.4's llama3_8b pretrain_recipe (launch/jobs/nemo_pretrain.py runs it, launch/nemo.py overrides no such
    # flag): the distributed optimizer, grad_reduce_in_fp32, overlapped grad reduce and param gather, and no TP
    # communication overlap (only performance_mode's MegatronCommOverlapCallback would add one).
    nemo2, bridge = backend_software("nemo2"), backend_software("bridge")
    assert (nemo2.sharding, nemo2.grad_reduce_bytes, nemo2.dp_overlap, nemo2.tp_overlap) == ("zero1", 4, True, False)
    assert (bridge.sharding, bridge.tp_overlap, bridge.backend) == ("zero1", True, "nemo")
    assert backend_software("nemo") == bridge  # --backend nemo without a spec: the default container's Bridge


def test_llm_plan_tells_nemo2_from_bridge(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--model", "llama3-8b", "--instance", "p5.48xlarge", "--nodes", "1", "--tensor-parallel", "4"]
    nemo2, bridge = _plan(capsys, *argv, "--backend", "nemo2"), _plan(capsys, *argv, "--backend", "bridge")
    assert nemo2["backend"] == bridge["backend"] == "nemo"  # one stack's fitted rates
    assert nemo2["step_time_s"] > bridge["step_time_s"]  # TP collectives on the critical path
    assert _plan(capsys, *argv, "--backend", "nemo")["step_time_s"] == bridge["step_time_s"]
