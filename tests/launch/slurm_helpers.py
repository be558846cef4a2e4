"""Submitting with the real submit command and watching jobs on the local cluster."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import time
from pathlib import Path
from typing import Any

import torch

from cluster.verify.local_slurm import LocalSlurm
from launch.submit import main as submit_main
from training.export import load_checkpoint_model

NEVER_RUNS = {"PartitionConfig", "BadConstraints", "DependencyNeverSatisfied", "PartitionNodeLimit", "InvalidAccount"}
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}


def submit(cluster: LocalSlurm, argv: list[str], env: dict[str, str] | None = None) -> list[str]:
    """Runs `python -m launch.submit ARGV` in process against `cluster`; returns the job ids it printed."""
    saved = dict(os.environ)
    os.environ.update({"SLURM_CONF": str(cluster.conf_path), **(env or {})})
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = submit_main(argv)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert code == 0, err.getvalue()
    return [line.split()[0] for line in out.getvalue().splitlines() if line.strip()]


def _story_or_log(cluster: LocalSlurm | None, run_dir: Path | None, job_id: str) -> str:
    if run_dir is None:
        return ""
    return "\n" + (job_story(cluster, run_dir, job_id) if cluster is not None else job_log(run_dir))


def wait_for_end(
    cluster: LocalSlurm, job_id: str, timeout_s: float = 600, run_dir: Path | None = None
) -> dict[str, str]:
    """The job's record once it is in a terminal state. The bound is generous (a loaded 2-core machine runs these
    jobs several times slower); when it expires the message says what the job was doing, with its story."""
    deadline = time.monotonic() + timeout_s
    job: dict[str, str] = {}
    while time.monotonic() < deadline:
        job = cluster.job(job_id)
        if job.get("JobState") in TERMINAL:
            return job
        if job.get("JobState") == "PENDING" and job.get("Reason") in NEVER_RUNS:
            raise AssertionError(f"job {job_id} can never run here: {job['Reason']}")
        time.sleep(0.5)
    raise AssertionError(
        f"waited {timeout_s:.0f} s for job {job_id} to end; it was {job.get('JobState')} ({job.get('Reason')}, "
        f"Restarts {job.get('Restarts')})" + _story_or_log(cluster, run_dir, job_id)
    )


def attempt_started(run_dir: Path, job_id: str, restart: int) -> bool:
    """Whether attempt `restart` (0 for the first) of the job has started: the job script's first line for it
    (launch/jobs/common.sh job_start) is in the job's log. Every attempt appends to the same log, so an attempt
    that started, ran and ended between two looks is still seen, which the job's state alone cannot tell."""
    line = re.compile(rf"^job\[[^\]]*\]: job {re.escape(job_id)} \(.*\) restart {restart};", re.M)
    return bool(line.search(job_log(run_dir)))


def wait_for_restart(cluster: LocalSlurm, run_dir: Path, job_id: str, restarts: int, timeout_s: float = 600) -> None:
    """Until the job's attempt after `restarts` requeues has started (it may have ended already)."""
    deadline = time.monotonic() + timeout_s
    job: dict[str, str] = {}
    while True:
        job = cluster.job(job_id)  # the state first: a terminal state read before the log makes the log final
        if attempt_started(run_dir, job_id, restarts):
            return
        if job.get("JobState") in TERMINAL:
            raise AssertionError(
                f"job {job_id} ended ({job.get('JobState')}, Restarts {job.get('Restarts')}) without starting "
                f"attempt {restarts + 1}" + _story_or_log(cluster, run_dir, job_id)
            )
        if time.monotonic() > deadline:
            raise AssertionError(
                f"waited {timeout_s:.0f} s for job {job_id} to start attempt {restarts + 1}; it is "
                f"{job.get('JobState')} ({job.get('Reason')}, Restarts {job.get('Restarts')})"
                + _story_or_log(cluster, run_dir, job_id)
            )
        time.sleep(0.2)


RESUMED = re.compile(r"resumed from \S+/step-(\d+) at step (\d+)")


def resumed_steps(run_dir: Path) -> list[int]:
    """The checkpoint step each resume of the run started from, in order (the trainer logs one line per resume)."""
    return [int(match.group(1)) for match in RESUMED.finditer(job_log(run_dir))]


def wait_for_resume(run_dir: Path, count: int, timeout_s: float = 600) -> int:
    """The checkpoint step of the run's `count`-th resume, once the trainer has logged it."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = resumed_steps(run_dir)
        if len(found) >= count:
            return found[count - 1]
        if time.monotonic() > deadline:
            raise AssertionError(
                f"waited {timeout_s:.0f} s for resume {count} of {run_dir}; saw {found}\n{job_log(run_dir)}"
            )
        time.sleep(0.1)


def train_records(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line being written right now
        if record.get("kind") == "train":
            records.append(record)
    return records


def losses_by_step(run_dir: Path) -> dict[int, float]:
    """The last loss logged for each step (steps re-run after a resume overwrite the lost attempt's)."""
    return {record["step"]: record["loss"] for record in train_records(run_dir)}


def fsdp_argv(config: Path, data: str, run_dir: Path, max_steps: int, *extra: str, time: str = "00:20:00") -> list[str]:
    """llm-submit's arguments for the tiny FSDP job on two local nodes, as the fault tests submit it."""
    return [
        "--backend", "fsdp", "--model", str(config), "--nodes", "2", "--data-prefix", data,
        "--run-dir", str(run_dir), "--local", "--time", time, "--signal-lead", "120",
        "--max-steps", str(max_steps), *extra,
    ]  # fmt: skip


def assert_same_losses(run_dir: Path, reference: Path, steps: int) -> None:
    """Every step logged once at least, each step's last loss the uninterrupted run's (within float noise)."""
    expected, got = losses_by_step(reference), losses_by_step(run_dir)
    assert sorted(got) == list(range(1, steps + 1))
    for step, loss in expected.items():
        assert abs(got[step] - loss) <= 1e-6, (step, got[step], loss)


def assert_same_final_weights(run_dir: Path, reference: Path, steps: int) -> None:
    """The final checkpoint's weights equal the uninterrupted run's, tensor for tensor (the resume is bit-exact)."""
    final = load_checkpoint_model(run_dir / "checkpoints" / f"step-{steps}").state_dict()
    wanted = load_checkpoint_model(reference / "checkpoints" / f"step-{steps}").state_dict()
    assert final.keys() == wanted.keys()
    different = [name for name in wanted if not torch.equal(final[name], wanted[name])]
    assert not different, different


def wait_for_step(run_dir: Path, step: int, timeout_s: float = 600, poll_s: float = 0.05) -> int:
    """The last logged step once it is >= `step`."""
    deadline = time.monotonic() + timeout_s
    records: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        records = train_records(run_dir)
        if records and records[-1]["step"] >= step:
            return int(records[-1]["step"])
        time.sleep(poll_s)
    last = records[-1]["step"] if records else None
    raise AssertionError(f"waited {timeout_s:.0f} s for step {step} of {run_dir}; last step {last}\n{job_log(run_dir)}")


def trainer_rank_pid(run_dir: Path, rank: int) -> int:
    """The trainer worker of `rank` for this run (torchrun's child, which has RANK in its environment)."""
    marker = f"\0RANK={rank}\0".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        if b"training.train" in cmdline and str(run_dir).encode() in cmdline and marker in b"\0" + environ:
            return int(proc.name)
    raise AssertionError(f"no rank {rank} trainer process for {run_dir}")


def kill_rank(run_dir: Path, rank: int) -> None:
    os.kill(trainer_rank_pid(run_dir, rank), signal.SIGKILL)


def job_log(run_dir: Path) -> str:
    logs = sorted((run_dir / "logs").glob("*.out"))
    return "\n".join(log.read_text(errors="replace") for log in logs)


def job_story(cluster: LocalSlurm, run_dir: Path, job_id: str) -> str:
    """The job's log, then what explains its path in a few lines at the end (where a CI log's tail shows them):
    the job script's own decisions, errors from any rank, and what slurmctld and the slurmds said of the job."""
    log = job_log(run_dir)
    decisions = [line for line in log.splitlines() if line.startswith("job[")]
    errors = [line for line in log.splitlines() if " ERROR " in line or "Error" in line or "Traceback" in line]
    daemons: list[str] = []
    for daemon_log in sorted(cluster.log_dir.glob("slurm*.log")):
        lines = daemon_log.read_text(errors="replace").splitlines()
        daemons += [
            f"{daemon_log.name}: {line}" for line in lines if f"JobId={job_id}" in line or f"job {job_id}" in line
        ]
    return "\n".join(
        [log, f"---- job {job_id}: the script's decisions ----", *decisions, "---- errors ----", *errors[-20:],
         "---- daemons ----", *daemons[-30:], f"---- scontrol: {cluster.job(job_id)}"]
    )  # fmt: skip


def job_id_of(run_dir: Path) -> str:
    """The job id in the name of the run's (first) log, <job name>-<job id>.out."""
    log = sorted((run_dir / "logs").glob("*.out"))[0]
    return log.stem.rsplit("-", 1)[1]
