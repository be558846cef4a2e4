"""One job per run directory: a lease file, RUN_DIR/.lease, naming the Slurm jobs that may write there.

Two jobs on one run directory destroy each other (at start the trainer removes every uncommitted step, which
is the other job's save in progress), so:

- `llm-submit` refuses a run directory whose lease a live job holds, and records the jobs it submits there;
- every job script takes the lease at start (launch/jobs/common.sh `take_lease`, running this file by path,
  stdlib only) and refuses to run, touching nothing in the run directory, while another live job holds it;
- the script refreshes the lease's modification time every HEARTBEAT_S seconds while it runs (its heartbeat)
  and releases it when the job ends for good (a requeued job keeps it).

A holder is dead, and its lease is reclaimed, when Slurm lists none of its jobs as pending or running (ended,
cancelled, killed, or forgotten), or when it runs with a heartbeat older than STALE_AFTER_S (its batch host is
gone). The read-decide-write sequence runs under an flock on RUN_DIR/.lease.lock (FSx for Lustre as
ParallelCluster mounts it supports flock), so two submitters or two starting jobs cannot both take it.

    python launch/lease.py take --run-dir DIR --job-id ID    # exit 0: taken; EXIT_HELD: held by a live job
    python launch/lease.py release --run-dir DIR --job-id ID
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

LEASE_FILE = ".lease"
LOCK_FILE = ".lease.lock"
HEARTBEAT_S = 30
STALE_AFTER_S = 600  # 20 missed heartbeats: the batch host is gone, not slow
EXIT_HELD = 3  # the job script's exit status when another live job holds the run directory

# squeue's long state names of a job that still owns its run directory (Slurm's job_state_string()).
LIVE_STATES = frozenset(
    {
        "PENDING",
        "RUNNING",
        "SUSPENDED",
        "COMPLETING",
        "CONFIGURING",
        "REQUEUED",
        "REQUEUE_HOLD",
        "REQUEUE_FED",
        "RESIZING",
        "SIGNALING",
        "STAGE_OUT",
        "STOPPED",
        "RESV_DEL_HOLD",
    }
)

JobStates = Callable[[], dict[str, str] | None]


class LeaseHeld(Exception):
    """Another live job holds the run directory; the message is one line naming it."""


@dataclass(frozen=True)
class Lease:
    jobs: tuple[str, ...]  # the job ids that may write in the run directory (a Neuron compile job and its training job)
    host: str  # where it was last taken: the submit host, then the job's batch host
    heartbeat: float  # the lease file's modification time

    def render(self) -> str:
        return f"jobs={' '.join(self.jobs)}\nhost={self.host}\n"


def lease_path(run_dir: Path) -> Path:
    return run_dir / LEASE_FILE


def read_lease(run_dir: Path) -> Lease | None:
    path = lease_path(run_dir)
    try:
        text = path.read_text(encoding="utf-8")
        heartbeat = path.stat().st_mtime
    except FileNotFoundError:
        return None
    fields = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    return Lease(tuple(fields.get("jobs", "").split()), fields.get("host", "?"), heartbeat)


def slurm_job_states(env: dict[str, str] | None = None) -> dict[str, str] | None:
    """Every job slurmctld still knows, id -> long state; None when it cannot be asked."""
    try:
        result = subprocess.run(
            ["squeue", "-h", "-a", "--states=all", "-o", "%i|%T"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env=env,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if result.returncode != 0:
        return None
    return dict(line.split("|", 1) for line in result.stdout.split() if "|" in line)


def holder_is_alive(lease: Lease, states: dict[str, str] | None, now: float) -> tuple[bool, str]:
    """Whether the holder still owns the run directory, and in words what Slurm and the heartbeat say."""
    age = now - lease.heartbeat
    if states is None:
        # Slurm cannot be asked: only the heartbeat tells.
        return age <= STALE_AFTER_S, f"Slurm not answering, heartbeat {age:.0f} s ago"
    live = {job: states[job] for job in lease.jobs if states.get(job) in LIVE_STATES}
    if not live:
        ended = ", ".join(f"{job} {states.get(job, 'unknown to Slurm')}" for job in lease.jobs) or "no job"
        return False, ended
    said = ", ".join(f"{job} {state}" for job, state in live.items())
    # Only a running job beats (a pending or suspended one does not).
    if "RUNNING" in live.values() and age > STALE_AFTER_S:
        return False, f"{said} with its heartbeat {age:.0f} s old (over {STALE_AFTER_S} s)"
    return True, f"{said} on {lease.host}, heartbeat {age:.0f} s ago"


@contextlib.contextmanager
def locked(run_dir: Path) -> Iterator[None]:
    """The lease's lock: held while one submitter or job reads, decides and writes."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / LOCK_FILE, "a", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _write(run_dir: Path, lease: Lease) -> None:
    temporary = run_dir / f"{LEASE_FILE}.{os.getpid()}.tmp"
    temporary.write_text(lease.render(), encoding="utf-8")
    os.replace(temporary, lease_path(run_dir))


def check_free(run_dir: Path, job_ids: Sequence[str] = (), states: JobStates = slurm_job_states) -> str | None:
    """Raises LeaseHeld while a live job other than `job_ids` holds the run directory (call it under `locked`);
    returns a line saying whose dead lease is being reclaimed, or None."""
    lease = read_lease(run_dir)
    if lease is None or set(job_ids) & set(lease.jobs):
        return None
    alive, said = holder_is_alive(lease, states(), time.time())
    holder = " ".join(lease.jobs) or "?"
    if alive:
        raise LeaseHeld(
            f"--run-dir: {run_dir} is in use by job {holder} ({said}); two jobs on one run directory delete each "
            f"other's checkpoints: wait for it to end, or scancel {holder}"
        )
    return f"lease: reclaimed {run_dir} from job {holder} ({said})"


def record(run_dir: Path, job_ids: Sequence[str], host: str | None = None) -> None:
    """The lease now names `job_ids` (call it under `locked`, after check_free)."""
    _write(run_dir, Lease(tuple(job_ids), host or socket.gethostname(), time.time()))


def take(run_dir: Path, job_id: str, states: JobStates = slurm_job_states) -> str:
    """At a job's start: the lease for `job_id` (its own, kept with its sibling jobs, or reclaimed from a dead
    holder); raises LeaseHeld while another live job holds it. Returns the line the job logs."""
    with locked(run_dir):
        lease = read_lease(run_dir)
        reclaimed = check_free(run_dir, [job_id], states)
        jobs = lease.jobs if lease is not None and job_id in lease.jobs else (job_id,)
        record(run_dir, jobs)
    return reclaimed or f"lease: {run_dir} held by job {' '.join(jobs)} on {socket.gethostname()}"


def release(run_dir: Path, job_id: str) -> None:
    """At a job's end for good: `job_id` leaves the lease; the last one removes it."""
    with locked(run_dir):
        lease = read_lease(run_dir)
        if lease is None or job_id not in lease.jobs:
            return
        rest = tuple(job for job in lease.jobs if job != job_id)
        if rest:
            record(run_dir, rest, lease.host)
        else:
            lease_path(run_dir).unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python launch/lease.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("take", "release"))
    parser.add_argument("--run-dir", required=True, type=Path)
    parser.add_argument("--job-id", required=True)
    args = parser.parse_args(argv)
    if args.action == "release":
        release(args.run_dir, args.job_id)
        return 0
    try:
        print(take(args.run_dir, args.job_id))
    except LeaseHeld as held:
        print(str(held).removeprefix("--run-dir: "))
        return EXIT_HELD
    return 0


if __name__ == "__main__":
    sys.exit(main())
