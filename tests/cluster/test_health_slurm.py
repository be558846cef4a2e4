"""The health prolog on the real local SLURM cluster: a failing node drains itself and the job moves on."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from cluster.config_builder import build_cluster_config, example_refs
from cluster.verify.local_slurm import LocalSlurm
from cluster.verify.local_slurm.harness import NodeState
from spec import load_spec
from tests.cluster.test_bootstrap import fixture_node, run
from tests.launch.slurm_helpers import TERMINAL
from tests.waiting import wait_until


@pytest.mark.slurm
def test_a_node_failing_the_prolog_is_drained_and_the_job_runs_on_the_other(
    local_slurm: LocalSlurm, tmp_path: Path
) -> None:
    cluster = local_slurm
    # n2 "loses" its GPUs: its settings now expect 8, and it has none.
    cluster.health_config("n2").write_text(cluster.health_config("n2").read_text() + "HEALTH_EXPECTED_GPUS=8\n")
    # Hold n1 so the scheduler's first choice is n2; release it once n2 has failed.
    cluster.run(["scontrol", "update", "nodename=n1", "state=drain", "reason=test-hold"])
    out = tmp_path / "job.out"
    job_id = cluster.run(
        ["sbatch", "--parsable", "-N", "1", "-o", str(out), "--wrap", "echo ran on $SLURMD_NODENAME"]
    ).stdout.strip()

    def n2_drained() -> NodeState | None:
        n2 = {s.name: s for s in cluster.node_states()}["n2"]
        return n2 if n2.state in {"drained", "draining"} else None

    n2 = wait_until(n2_drained, "n2 drained by its health prolog", story=lambda: str(cluster.node_states()))
    assert n2.reason.startswith("health-prolog: gpu count 0, expected 8")

    cluster.run(["scontrol", "update", "nodename=n1", "state=resume"])
    wait_until(lambda: cluster.job(job_id)["JobState"] in TERMINAL, f"job {job_id} requeued onto n1 to end",
               story=lambda: str(cluster.job(job_id)))  # fmt: skip
    job = cluster.job(job_id)
    assert (job["JobState"], job["NodeList"], job["Restarts"]) == ("COMPLETED", "n1", "1")
    assert out.read_text().strip().splitlines()[-1] == "ran on n1"


@contextmanager
def small_filesystem(path: Path, size: str = "16m") -> Iterator[Path]:
    """A real file system with `size` of room (a tmpfs; the local cluster already needs root)."""
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)


@pytest.mark.slurm
def test_a_node_below_the_floors_its_bootstrap_wrote_is_drained(local_slurm: LocalSlurm, tmp_path: Path) -> None:
    """Issue 42, fault 8: the floors the config builder derives for the default spec (one stop's checkpoint on the
    shared file system, 106 GiB; 20 GiB of scratch), written by the real gpu_node.sh, drain a node whose file systems
    hold less. Before, gpu_node.sh wrote no floors and the prolog compared with 0."""
    spec = load_spec()
    (queue,) = build_cluster_config(spec, example_refs(spec))["Scheduling"]["SlurmQueues"]
    (action,) = queue["CustomActions"]["OnNodeConfigured"]["Sequence"]
    args: list[str] = action["Args"]
    # Short mount points: Slurm keeps 200 characters of the reason, and it should hold both failures.
    mounts = Path(tempfile.mkdtemp(prefix="floors-", dir="/tmp"))
    with small_filesystem(mounts / "fsx") as fsx, small_filesystem(mounts / "scratch") as scratch:
        args[args.index("--shared-dir") + 1] = str(fsx)
        args[args.index("--scratch-dir") + 1] = str(scratch)
        args[args.index("--python") + 1] = "python3"
        node = fixture_node(tmp_path / "p5", efa=32, gpus=8)
        bootstrap = run("gpu_node.sh", args, {**node, "PYTHON_INSTALL": "false"})
        assert bootstrap.returncode == 0, bootstrap.stderr
        written = (tmp_path / "p5" / "root" / "etc" / "llm-health" / "health.env").read_text().splitlines()
        # The storage settings onto n2 (a CPU node here: its accelerator counts stay the local ones).
        storage = [line for line in written if line.startswith(("HEALTH_FSX_", "HEALTH_MIN_", "HEALTH_SCRATCH_"))]
        assert len(storage) == 4, written
        n2 = local_slurm.health_config("n2")
        n2.write_text(n2.read_text() + "\n".join(storage) + "\n")

        local_slurm.run(["scontrol", "update", "nodename=n1", "state=drain", "reason=test-hold"])
        out = tmp_path / "job.out"
        job_id = local_slurm.run(
            ["sbatch", "--parsable", "-N", "1", "-o", str(out), "--wrap", "echo ran on $SLURMD_NODENAME"]
        ).stdout.strip()

        def n2_drained() -> NodeState | None:
            state = {s.name: s for s in local_slurm.node_states()}["n2"]
            return state if state.state in {"drained", "draining"} else None

        drained = wait_until(n2_drained, "n2 drained by its prolog", story=lambda: str(local_slurm.node_states()))
        assert drained is not None
        assert drained.reason == (
            f"health-prolog: fsx: {fsx} has 0 GiB free, below 106 GiB; scratch: {scratch} has 0 GiB free, below 20 GiB"
        )
        local_slurm.run(["scontrol", "update", "nodename=n1", "state=resume"])
        wait_until(lambda: local_slurm.job(job_id)["JobState"] in TERMINAL, f"job {job_id} requeued onto n1 to end",
                   story=lambda: str(local_slurm.job(job_id)))  # fmt: skip
        assert (local_slurm.job(job_id)["JobState"], local_slurm.job(job_id)["NodeList"]) == ("COMPLETED", "n1")
    shutil.rmtree(mounts)
