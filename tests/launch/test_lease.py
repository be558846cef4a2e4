"""launch/lease.py on real files, with Slurm's answer (squeue's job states) given: who may write in a run directory.

The same lease on the real local cluster, with real squeue, is tests/launch/test_job_faults_slurm.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from launch import lease


def _states(**jobs: str) -> lease.JobStates:
    return lambda: {job.removeprefix("j"): state for job, state in jobs.items()}


def _age(run_dir: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(run_dir / lease.LEASE_FILE, (then, then))


def test_a_live_holder_refuses_the_run_directory_in_one_line_naming_it_and_the_job(tmp_path: Path) -> None:
    lease.take(tmp_path, "11", _states())
    for state in ("PENDING", "RUNNING", "COMPLETING", "REQUEUED"):
        with pytest.raises(lease.LeaseHeld) as held:
            lease.take(tmp_path, "12", _states(j11=state))
        message = str(held.value)
        assert message.startswith(f"--run-dir: {tmp_path} is in use by job 11 (11 {state}")
        assert "scancel 11" in message and "\n" not in message
    assert (tmp_path / lease.LEASE_FILE).read_text().startswith("jobs=11\n")


@pytest.mark.parametrize("state", ["COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", None])
def test_a_holder_slurm_says_has_ended_is_reclaimed(tmp_path: Path, state: str | None) -> None:
    lease.take(tmp_path, "11", _states())
    said = lease.take(tmp_path, "12", _states(**({"j11": state} if state else {})))
    assert said.startswith(f"lease: reclaimed {tmp_path} from job 11 (11 {state or 'unknown to Slurm'})")
    assert (tmp_path / lease.LEASE_FILE).read_text().startswith("jobs=12\n")


def test_a_running_holder_whose_heartbeat_stopped_is_reclaimed_but_a_pending_one_keeps_it(tmp_path: Path) -> None:
    lease.take(tmp_path, "11", _states())
    _age(tmp_path, lease.STALE_AFTER_S + 5)
    for waiting in ("PENDING", "SUSPENDED"):  # requeued or suspended: no heartbeat until it runs again
        with pytest.raises(lease.LeaseHeld):
            lease.take(tmp_path, "12", _states(j11=waiting))
    assert "heartbeat" in lease.take(tmp_path, "12", _states(j11="RUNNING"))


def test_without_slurm_only_the_heartbeat_tells(tmp_path: Path) -> None:
    lease.take(tmp_path, "11", _states())
    with pytest.raises(lease.LeaseHeld, match="Slurm not answering"):
        lease.take(tmp_path, "12", lambda: None)
    _age(tmp_path, lease.STALE_AFTER_S + 5)
    assert "reclaimed" in lease.take(tmp_path, "12", lambda: None)


def test_a_compile_job_and_its_training_job_share_the_lease_until_the_last_releases_it(tmp_path: Path) -> None:
    with lease.locked(tmp_path):
        assert lease.check_free(tmp_path, states=_states()) is None
        lease.record(tmp_path, ["21", "22"])
    # Each starts under the lease llm-submit took for both; the other stays named.
    lease.take(tmp_path, "21", _states(j22="PENDING"))
    assert (tmp_path / lease.LEASE_FILE).read_text().startswith("jobs=21 22\n")
    lease.release(tmp_path, "21")
    with pytest.raises(lease.LeaseHeld):
        lease.take(tmp_path, "23", _states(j22="PENDING"))
    lease.take(tmp_path, "22", _states())
    lease.release(tmp_path, "99")  # not a holder: nothing changes
    assert (tmp_path / lease.LEASE_FILE).exists()
    lease.release(tmp_path, "22")
    assert not (tmp_path / lease.LEASE_FILE).exists()


def test_the_job_script_runs_it_by_path_and_reads_its_exit_status(tmp_path: Path) -> None:
    """common.sh runs `python launch/lease.py` from the release, with no PYTHONPATH: stdlib only."""
    tool = Path(lease.__file__)
    env = {"PATH": str(tmp_path / "no-slurm-here")}  # squeue not found: Slurm cannot be asked

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, str(tool), *argv], capture_output=True, text=True, env=env, check=False)

    taken = run("take", "--run-dir", str(tmp_path), "--job-id", "31")
    assert (taken.returncode, taken.stdout) == (0, f"lease: {tmp_path} held by job 31 on {os.uname().nodename}\n")
    # No Slurm to ask here, and a fresh heartbeat: held.
    refused = run("take", "--run-dir", str(tmp_path), "--job-id", "32")
    assert refused.returncode == lease.EXIT_HELD, refused
    assert refused.stdout.startswith(f"{tmp_path} is in use by job 31 (Slurm not answering, heartbeat ")
    assert run("release", "--run-dir", str(tmp_path), "--job-id", "31").returncode == 0
    assert not (tmp_path / lease.LEASE_FILE).exists()
