"""Our sbatch scripts against a slurmctld named and configured as ParallelCluster configures the spec's cluster.

For every spec (the default and spec/examples/*.yaml), every queue and every backend that runs on it, the
script `launch.submit` renders for the whole queue is given to `sbatch --test-only` on a local controller
(cluster.verify.local_slurm.pcluster_shaped): each must be accepted. A wrong partition, GRES or node count must not.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster.config_builder import kill_wait_s
from cluster.verify.local_slurm.pcluster_shaped import PclusterShapedSlurm
from launch.submit import parse_options, render
from spec import load_spec
from spec.platform.instances import instance_facts
from tests.launch.conftest import write_job
from tests.training.jobs import prepare_demo_subset

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[2]
SPECS = [REPO / "spec" / "default.yaml", *sorted((REPO / "spec" / "examples").glob("*.yaml"))]
NEURON_CONFIG = REPO / "launch" / "jobs" / "configs" / "neuron-pythia-6.9b.yaml"
BACKENDS_FOR = {"gpu": ("fsdp", "nemo"), "neuron": ("neuron",)}


@pytest.fixture(scope="module")
def demo_data(tmp_path_factory: pytest.TempPathFactory) -> str:
    return prepare_demo_subset(tmp_path_factory.mktemp("pcluster-data"))


@pytest.fixture(autouse=True)
def _root_and_no_deployed_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    if os.geteuid() != 0:
        pytest.skip("a local slurmctld needs root (munged, slurm-wlm)")
    monkeypatch.delenv("LLM_TRAINING_SPEC", raising=False)


def _controller(state_dir: Path, spec_path: Path) -> Iterator[PclusterShapedSlurm]:
    controller = PclusterShapedSlurm.for_spec(state_dir, load_spec(spec_path))
    try:
        controller.up()
        yield controller
    finally:
        controller.down()


@pytest.fixture
def p5_controller(tmp_path: Path) -> Iterator[PclusterShapedSlurm]:
    yield from _controller(tmp_path / "slurm", REPO / "spec" / "examples" / "p5-on-demand.yaml")


def _scripts(spec_path: Path, queue: str, backend: str, nodes: int, data: str, out: Path) -> list[Path]:
    """The job's sbatch script(s), written as `launch.submit` writes them (the Neuron backend renders two)."""
    out.mkdir(parents=True, exist_ok=True)
    # One micro-batch of 4 per GPU rank (8 a node): a global batch every data-parallel layout divides.
    batch = {"micro_batch_size": 4, "global_batch_size": 4 * 8 * nodes}
    config = NEURON_CONFIG if backend == "neuron" else write_job(out / f"job-{nodes}.yaml", data=batch)
    argv = ["--backend", backend, "--model", str(config), "--nodes", str(nodes), "--data-prefix", data]
    argv += ["--run-dir", str(out / f"{queue}-{backend}"), "--spec", str(spec_path), "--queue", queue]
    paths = []
    for script in render(parse_options(argv), "test").scripts:
        script.path.parent.mkdir(parents=True, exist_ok=True)
        script.path.write_text(script.text, encoding="utf-8")
        paths.append(script.path)
    return paths


def _accepted(answer: str, partition: str) -> bool:
    return "to start at" in answer and f"in partition {partition}" in answer


@pytest.mark.parametrize("spec_path", SPECS, ids=lambda path: path.stem)
def test_every_queue_and_backend_script_is_accepted_by_a_parallelcluster_shaped_slurmctld(
    spec_path: Path, tmp_path: Path, demo_data: str
) -> None:
    spec = load_spec(spec_path)
    assert spec.cluster is not None
    checked = []
    for controller in _controller(tmp_path / "slurm", spec_path):
        for queue in spec.cluster.queues:
            backends = BACKENDS_FOR[instance_facts(queue.instance_type).accelerator]
            if not spec.cluster.containers.pyxis:
                backends = tuple(b for b in backends if b != "nemo")
            assert backends, queue.name
            for backend in backends:
                for script in _scripts(spec_path, queue.name, backend, queue.max_count, demo_data, tmp_path):
                    assert f"#SBATCH --partition={queue.name}" in script.read_text().splitlines()
                    answer = controller.test_only(script)
                    told = answer.stderr + answer.stdout
                    assert answer.returncode == 0 and _accepted(told, queue.name), f"{script.name}: {told}"
                    checked.append((queue.name, backend, script.name))
    assert {queue for queue, _, _ in checked} == {queue.name for queue in spec.cluster.queues}


def test_the_eval_and_fabric_scripts_and_their_gpu_requests_are_accepted(
    p5_controller: PclusterShapedSlurm, tmp_path: Path, demo_data: str
) -> None:
    """llm-eval's job and the fabric check ask for the node's GPUs too (tests/slurm/test_gpu_requests.py)."""
    from tests.slurm.test_gpu_requests import job_scripts
    from training.evaluate.task_data import build_task_data

    tasks = tmp_path / "tasks"
    tasks.mkdir()
    build_task_data(tasks)
    spec_path = REPO / "spec" / "examples" / "p5-on-demand.yaml"
    scripts = job_scripts(spec_path, "gpu", demo_data, tasks, tmp_path / "jobs")
    assert set(scripts) == {"fsdp", "nemo", "eval", "fabric"}
    for name, text in scripts.items():
        assert "#SBATCH --gpus-per-node=8" in text.splitlines(), name
        path = tmp_path / f"{name}.sbatch"
        path.write_text(text)
        answer = p5_controller.test_only(path)
        assert answer.returncode == 0 and _accepted(answer.stderr, "gpu"), f"{name}: {answer.stderr}"


def test_a_wrong_partition_gres_or_node_count_is_refused(
    p5_controller: PclusterShapedSlurm, tmp_path: Path, demo_data: str
) -> None:
    spec_path = REPO / "spec" / "examples" / "p5-on-demand.yaml"
    (script,) = _scripts(spec_path, "gpu", "fsdp", 2, demo_data, tmp_path)
    accepted = p5_controller.test_only(script)
    assert accepted.returncode == 0 and _accepted(accepted.stderr, "gpu"), accepted.stderr
    # GRES is configured as ParallelCluster sets it: the node's 8 H100s are requestable, by type too (a command-line
    # --gpus-per-node replaces the script's own).
    for fits in ("--gpus-per-node=h100:8", "--gpus-per-node=8", "--constraint=p5-48xlarge&efa&gpu"):
        answer = p5_controller.test_only(script, fits)
        assert answer.returncode == 0 and _accepted(answer.stderr, "gpu"), f"{fits}: {answer.stderr}"
    for wrong, why in (
        ("--partition=compute", "invalid partition"),
        ("--gpus-per-node=h100:9", "Requested node configuration is not available"),
        ("--gpus-per-node=9", "Requested node configuration is not available"),
        ("--gpus-per-node=a100:8", "Requested node configuration is not available"),
        # A typed --gres next to the script's untyped request: why --sbatch-arg refuses GPU options.
        ("--gres=gpu:h100:8", "Invalid GRES specification (with and without type identification)"),
        ("--gres=neuron:1", "Invalid generic resource"),
        ("--nodes=5", "Node count specification invalid"),
        ("--constraint=trn1-32xlarge", "Invalid feature specification"),
    ):
        answer = p5_controller.test_only(script, wrong)
        assert answer.returncode != 0 and why in answer.stderr, f"{wrong}: {answer.stderr}"
    # A script rendered for another deployment's queue (p4d's 'a100') names a partition this cluster lacks.
    (other,) = _scripts(REPO / "spec" / "examples" / "p4d-odcr.yaml", "a100", "fsdp", 2, demo_data, tmp_path / "o")
    answer = p5_controller.test_only(other)
    assert answer.returncode != 0 and "invalid partition" in answer.stderr.lower(), answer.stderr


def test_the_controller_runs_with_the_kill_wait_the_cluster_config_derives(p5_controller: PclusterShapedSlurm) -> None:
    """Issue 42: slurm.conf takes the config's KillWait (CustomSlurmSettings) as its own, not Slurm's default 30 s:
    the time between a TERM (scancel, preemption, time limit) and the KILL that would cut the stop's save short."""
    spec = load_spec(REPO / "spec" / "examples" / "p5-on-demand.yaml")
    assert spec.cluster is not None
    expected = kill_wait_s(spec.cluster)
    assert expected is not None and expected > 30
    shown = p5_controller.run(["scontrol", "show", "config"]).stdout
    (line,) = [line for line in shown.splitlines() if line.startswith("KillWait ")]
    assert line.split("=", 1)[1].strip() == f"{expected} sec"
