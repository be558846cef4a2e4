"""The local SLURM harness: a real slurmctld and two slurmd on this host."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cluster.verify.local_slurm import LocalSlurm
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]


def _wait_for_job(cluster: LocalSlurm, job_id: str) -> str:
    def ended() -> str:
        state = cluster.job(job_id)["JobState"]
        return state if state in {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"} else ""

    return wait_until(ended, f"job {job_id} to end", story=lambda: str(cluster.job(job_id)))


@pytest.mark.slurm
def test_a_second_cluster_starts_runs_a_two_node_job_and_stops_cleanly(tmp_path: Path) -> None:
    # Its own cluster (not the session's): this test is about the lifecycle itself. Its folder is deeper than a
    # pytest-xdist worker's: slurmstepd's sockets (108 bytes at most) must not live under it.
    state_dir = tmp_path / ("nested-folder-" * 5) / "c"
    assert len(str(state_dir / "spool" / "n1" / "n1_1.4294967291")) > 108
    cluster = LocalSlurm(state_dir)
    try:
        cluster.up()
        first = cluster.running_daemons()
        assert set(first) == {"slurmd-n1", "slurmd-n2", "slurmctld", "munged"}
        cluster.up()  # idempotent: the running daemons are kept
        assert cluster.running_daemons() == first
        assert [(s.name, s.state) for s in cluster.node_states()] == [("n1", "idle"), ("n2", "idle")]

        out = tmp_path / "job.out"
        submitted = cluster.run(
            ["sbatch", "--parsable", "-N", "2", "-o", str(out), "--wrap", "srun bash -c 'echo $SLURMD_NODENAME'"]
        )
        job_id = submitted.stdout.strip()
        state = _wait_for_job(cluster, job_id)
        story = f"{cluster.job(job_id)}; output: {out.read_text() if out.exists() else '(none)'}"
        assert state == "COMPLETED", story
        assert sorted(out.read_text().split()) == ["n1", "n2"], story

        # A job still running when the cluster goes down must not outlive it.
        cluster.run(["sbatch", "-N", "2", "-o", "/dev/null", "--wrap", "srun sleep 600"])
        wait_until(cluster._step_daemons, "the sleeping job's step daemons")
    finally:
        cluster.down()
    assert cluster.running_daemons() == {}
    assert cluster._step_daemons() == []
    assert not cluster.spool_dir.exists()


@pytest.mark.slurm
def test_session_cluster_answers_client_commands(local_slurm: LocalSlurm) -> None:
    info = local_slurm.run(["sinfo", "-N", "-h", "-o", "%N %P %T"]).stdout.splitlines()
    assert info == ["n1 local* idle", "n2 local* idle"]
    status = local_slurm.status()
    assert status["up"] is True


def test_cli_status_of_a_stopped_cluster_exits_non_zero(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "cluster.verify.local_slurm", "status", "--state-dir", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 3
    assert '"up": false' in result.stdout


def test_cli_rejects_a_bad_timeout(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "cluster.verify.local_slurm", "wait", "--state-dir", str(tmp_path), "--timeout", "0"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "--timeout: 0.0 must be positive" in result.stderr
