"""Every job script we render for a GPU queue asks Slurm for the node's GPUs and still takes the whole node.

The count is checked against what ParallelCluster declares for the queue's nodes (cluster.slurm_names renders the
GRES of cluster/slurm_naming.json's facts gres_type, gres_conf and gpu_request): llm-submit's backends, llm-eval's
job and the fabric check, for the default spec and every example. `sbatch --test-only` on a ParallelCluster-shaped
slurmctld is tests/cluster/test_pcluster_slurm.py; a real job's sacct AllocTRES, test_local_slurm_accounting.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.config_builder import build_cluster_config, example_refs
from cluster.fabric.render import FabricJob, render_script
from cluster.slurm_names import fact, partitions
from launch import evaluate
from launch.submit import parse_options, render
from slurm.target import local_target, resolve_target
from spec import load_spec
from spec.platform.instances import instance_facts
from tests.launch.conftest import write_job
from tests.training.jobs import prepare_demo_subset
from training.evaluate.task_data import build_task_data

REPO = Path(__file__).resolve().parents[2]
SPECS = [REPO / "spec" / "default.yaml", *sorted((REPO / "spec" / "examples").glob("*.yaml"))]
NEURON_CONFIG = REPO / "launch" / "jobs" / "configs" / "neuron-pythia-6.9b.yaml"
GPU_OPTIONS = ("gpus", "gpus-per-node", "gres", "gpus-per-task")


@pytest.fixture(scope="module")
def demo_data(tmp_path_factory: pytest.TempPathFactory) -> str:
    return prepare_demo_subset(tmp_path_factory.mktemp("gpu-requests-data"))


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("tasks")
    build_task_data(directory)
    return directory


@pytest.fixture(autouse=True)
def _no_deployed_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LLM_TRAINING_SPEC", raising=False)


def directives(script: str) -> dict[str, str | None]:
    """The script's `#SBATCH --name[=value]` lines as {name: value}."""
    found: dict[str, str | None] = {}
    for line in script.splitlines():
        if line.startswith("#SBATCH --"):
            name, _, value = line.removeprefix("#SBATCH --").partition("=")
            found[name] = value if value else None
    return found


def declared_gpus(spec_path: Path) -> dict[str, int]:
    """GPUs per node of each queue, as ParallelCluster's gres.conf declares them (0: no GRES)."""
    config = build_cluster_config(load_spec(spec_path), example_refs(load_spec(spec_path)))
    counts: dict[str, int] = {}
    for partition in partitions(config):
        per_range = {node_range.gpus if node_range.gres else 0 for node_range in partition.ranges}
        assert len(per_range) == 1, f"{partition.name}: compute resources with different GPU counts"
        counts[partition.name] = per_range.pop()
    return counts


def job_scripts(spec_path: Path, queue: str, data: str, tasks: Path, out: Path) -> dict[str, str]:
    """Every script we render for the queue: the training backends, llm-eval's job (GPU) and the fabric check."""
    spec = load_spec(spec_path)
    assert spec.cluster is not None
    out.mkdir(parents=True, exist_ok=True)
    accelerator = instance_facts(spec.cluster.queue(queue).instance_type).accelerator
    scripts: dict[str, str] = {}
    backends: tuple[str, ...] = ("fsdp", "nemo") if accelerator == "gpu" else ("neuron",)
    if not spec.cluster.containers.pyxis:
        backends = tuple(backend for backend in backends if backend != "nemo")
    for backend in backends:
        config = NEURON_CONFIG if backend == "neuron" else write_job(out / "job.yaml", data={"global_batch_size": 64})
        argv = ["--backend", backend, "--model", str(config), "--nodes", "2", "--data-prefix", data,
                "--run-dir", str(out / f"{queue}-{backend}"), "--spec", str(spec_path), "--queue", queue]  # fmt: skip
        for script in render(parse_options(argv), "test").scripts:
            scripts[script.name] = script.text
    if accelerator == "gpu":
        run_dir = out / f"{queue}-eval"
        run_dir.mkdir(parents=True, exist_ok=True)
        eval_argv = ["--run-dir", str(run_dir), "--tasks-dir", str(tasks), "--tokenizer", __file__,
                     "--spec", str(spec_path), "--queue", queue]  # fmt: skip
        args = evaluate.build_parser().parse_args(eval_argv)
        scripts["eval"] = evaluate.render(args, "test")[1]
    target = resolve_target(spec, "fsdp" if accelerator == "gpu" else "neuron", queue, None)
    fabric = FabricJob(target=target, nodes=2, result_root=out / "fabric", python="python", workdir=REPO,
                       command_line="test")  # fmt: skip
    scripts["fabric"] = render_script(fabric)
    return scripts


@pytest.mark.parametrize("spec_path", SPECS, ids=lambda path: path.stem)
def test_every_script_requests_the_gpus_parallelcluster_declares_and_takes_whole_nodes(
    spec_path: Path, demo_data: str, tasks: Path, tmp_path: Path
) -> None:
    option = fact("gpu_request")["job_option"]
    for queue, gpus in declared_gpus(spec_path).items():
        for name, script in job_scripts(spec_path, queue, demo_data, tasks, tmp_path / queue).items():
            found = directives(script)
            assert "exclusive" in found, f"{queue} {name}: not a whole-node job"
            requested = {key: value for key, value in found.items() if key in GPU_OPTIONS}
            expected = {option: str(gpus)} if gpus else {}
            assert requested == expected, f"{queue} {name}: {requested}, ParallelCluster declares {gpus} GPUs"


def test_the_record_names_the_request_slurm_understands_for_parallelclusters_gres() -> None:
    request = fact("gpu_request")
    assert request["gres_name"] == "gpu" and request["job_option"] == "gpus-per-node"
    assert fact("scheduler_settings")["settings"]["GresTypes"] == request["gres_name"]
    assert "ConstrainDevices" in fact("cgroup_devices")["absent"]
    assert "AccountingStorageTRES" in fact("accounting_tres")["absent"]


def test_local_cpu_jobs_request_no_gpus() -> None:
    assert local_target().gpus_per_node == 0
    assert local_target().whole_node_directives() == []


GPU_OVERRIDE = "--gres=gpu:h100:8"
REFUSED = (
    f"error: --sbatch-arg: '{GPU_OVERRIDE}': the script already requests every GPU of its nodes "
    "(#SBATCH --gpus-per-node, whole nodes); leave GPU options out"
)


def test_llm_submit_refuses_a_gpu_option_in_sbatch_arg(
    demo_data: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from launch.submit import main

    config = write_job(tmp_path / "job.yaml", data={"global_batch_size": 64})
    argv = ["--backend", "fsdp", "--model", str(config), "--nodes", "2", "--data-prefix", demo_data,
            "--run-dir", str(tmp_path / "run"), "--dry-run", f"--sbatch-arg={GPU_OVERRIDE}"]  # fmt: skip
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == REFUSED


def test_llm_eval_and_the_fabric_check_refuse_a_gpu_option_in_sbatch_arg(
    tasks: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cluster.fabric.cli import main as fabric_main

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    eval_argv = ["--run-dir", str(run_dir), "--tasks-dir", str(tasks), "--tokenizer", __file__, "--dry-run",
                 f"--sbatch-arg={GPU_OVERRIDE}"]  # fmt: skip
    assert evaluate.main(eval_argv) == 2
    assert capsys.readouterr().err.strip() == REFUSED
    fabric_argv = ["render", "--queue", "gpu", "--nodes", "2", "--dry-run", f"--sbatch-arg={GPU_OVERRIDE}"]
    assert fabric_main(fabric_argv) == 2
    assert capsys.readouterr().err.strip() == REFUSED
    for harmless in ("--qos=big", "--account=ml", "--gpu-bind=closest"):
        assert fabric_main(["render", "--queue", "gpu", "--nodes", "2", "--dry-run", f"--sbatch-arg={harmless}"]) == 0
    capsys.readouterr()
