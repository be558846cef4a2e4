"""Faults of a job's life on a real local SLURM cluster with the rendered FSDP script, real torchrun and real DCP
checkpoints: a user's scancel, a preemption, the same job submitted twice, a job killed with SIGKILL, the time
limit of a job in a Capacity Block, and the end of the advance reservation a job runs in.

The cluster is shaped for them (its own, beside the session's): the partition `local` (PriorityTier 1) shares its two
nodes with `urgent` (PriorityTier 2) under PreemptType=preempt/partition_prio and PreemptMode=CANCEL with no
GraceTime, as a site that lets urgent work in does; KillWait is long enough for the tiny model's stop checkpoint,
as the cluster config sets it from the planned stop on a real cluster; each node has two CPUs, so two 2-node jobs of
one rank per node can run at once.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import re
import signal
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cluster.reservation_holds import release_held_jobs, run_scontrol
from cluster.verify.local_slurm import LocalSlurm
from launch.capacity_block import TERMINATION_LEAD_S
from launch.submit import main as submit_main
from tests.launch.conftest import write_job
from tests.launch.slurm_helpers import (
    TERMINAL,
    assert_same_final_weights,
    assert_same_losses,
    attempt_started,
    fsdp_argv,
    job_log,
    job_story,
    resumed_steps,
    submit,
    train_records,
    trainer_rank_pid,
    wait_for_end,
    wait_for_restart,
    wait_for_step,
)
from tests.waiting import wait_until
from training.export import load_checkpoint_model

pytestmark = pytest.mark.slurm

STEPS = 30
TIME_LIMIT = "00:30:00"  # the stops here wait out a KillWait of their own
CHECKPOINT_EVERY = 10  # write_job's
KILL_WAIT_S = 240  # the stop's checkpoint of the tiny model, with room for a loaded 2-core machine


class FaultCluster(LocalSlurm):
    """The local cluster with an `urgent` partition that preempts `local`, and a KillWait a stop fits in."""

    def _write_config(self) -> None:
        super()._write_config()
        partition = f"PartitionName={self.partition} Nodes={','.join(self.nodes)} Default=YES MaxTime=INFINITE State=UP"
        text = self.conf_path.read_text()
        assert partition in text and "\nKillWait=" in text
        text = text.replace(
            partition,
            f"{partition} PriorityTier=1\n"
            f"PartitionName=urgent Nodes={','.join(self.nodes)} MaxTime=INFINITE State=UP PriorityTier=2 PreemptMode=OFF",
        )
        text = text.replace("\nKillWait=", f"\nKillWait={KILL_WAIT_S}\n# the template's: KillWait=")
        self.conf_path.write_text(text + "\nPreemptType=preempt/partition_prio\nPreemptMode=CANCEL\n")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultCluster]:
    if os.geteuid() != 0:
        pytest.skip("the local SLURM cluster needs root (it installs slurm-wlm and runs slurmd)")
    faults = FaultCluster(tmp_path_factory.mktemp("slurm-faults"), cpus_per_node=2)
    try:
        faults.up()
        yield faults
    finally:
        faults.down()


@pytest.fixture
def fault_cluster(cluster: FaultCluster) -> FaultCluster:
    cluster.reset()
    return cluster


@pytest.fixture(scope="module")
def reference(cluster: FaultCluster, demo_data: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An uninterrupted run: the faulted runs must end with its losses and its final weights."""
    base = tmp_path_factory.mktemp("reference")
    run_dir = base / "run"
    (job_id,) = submit(cluster, fsdp_argv(write_job(base / "tiny.yaml"), demo_data, run_dir, STEPS, time=TIME_LIMIT))
    job = wait_for_end(cluster, job_id, run_dir=run_dir)
    assert (job["JobState"], job["Restarts"]) == ("COMPLETED", "0"), job_story(cluster, run_dir, job_id)
    return run_dir


def _committed(run_dir: Path, step: int) -> bool:
    return (run_dir / "checkpoints" / f"step-{step}" / "COMMITTED").exists()


def _newest_committed(run_dir: Path) -> int:
    steps = [int(p.parent.name.split("-")[1]) for p in (run_dir / "checkpoints").glob("step-*/COMMITTED")]
    return max(steps, default=0)


def _assert_ends_like_the_reference(run_dir: Path, reference: Path) -> None:
    assert_same_losses(run_dir, reference, STEPS)
    assert_same_final_weights(run_dir, reference, STEPS)


def _batch_shell_pid(cluster: LocalSlurm, job_id: str, run_dir: Path) -> int:
    """The job's batch script: slurmstepd runs it as `slurm_script` with SLURM_JOB_ID in its environment. Other
    local clusters on this host (another test run, the demo) number their jobs alike, so the process must also
    carry this cluster's SLURM_CONF and run the script rendered for this run directory."""
    markers = (f"\0SLURM_JOB_ID={job_id}\0".encode(), f"\0SLURM_CONF={cluster.conf_path}\0".encode())
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
            environ = b"\0" + (proc / "environ").read_bytes()
            scripts = [Path(arg).read_text(errors="replace") for arg in args if arg.endswith("/slurm_script")]
        except OSError:
            continue
        if all(marker in environ for marker in markers) and any(f"RUN_DIR={run_dir}\n" in text for text in scripts):
            return int(proc.name)
    raise AssertionError(f"no batch shell of job {job_id}")


def _stop_ranks(run_dir: Path) -> list[int]:
    """SIGSTOP both trainer ranks: they wait, as a long run's would be training, until Slurm's kill (SIGCONT before
    SIGTERM, slurmd's _rpc_terminate_job) or `_continue_ranks`."""
    pids = [trainer_rank_pid(run_dir, rank) for rank in (0, 1)]
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    return pids


def _continue_ranks(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


def test_a_user_scancel_ends_the_job_not_requeued_and_the_last_checkpoint_is_intact(
    fault_cluster: FaultCluster, demo_data: str, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    (job_id,) = submit(
        fault_cluster, fsdp_argv(write_job(tmp_path / "tiny.yaml"), demo_data, run_dir, STEPS, time=TIME_LIMIT)
    )
    wait_until(lambda: _committed(run_dir, CHECKPOINT_EVERY), "the first scheduled checkpoint")
    wait_for_step(run_dir, CHECKPOINT_EVERY + 2)
    fault_cluster.run(["scancel", job_id])
    job = wait_for_end(fault_cluster, job_id, run_dir=run_dir)
    story = job_story(fault_cluster, run_dir, job_id)
    assert (job["JobState"], job["Restarts"]) == ("CANCELLED", "0"), story
    log = job_log(run_dir)
    assert "got SIGTERM: cancelled (scancel); the job ends when the step does, not requeued" in log, story
    assert "cancelled (scancel; " in log and "): not requeued; submit the same command to resume" in log, story
    # The newest committed checkpoint (the scheduled one, or the stop's if it finished within KillWait) loads whole.
    newest = _newest_committed(run_dir)
    assert newest >= CHECKPOINT_EVERY
    assert load_checkpoint_model(run_dir / "checkpoints" / f"step-{newest}").state_dict()
    assert not (run_dir / ".lease").exists(), "a job that ended gives its run directory back"


def test_a_preemption_saves_within_killwait_requeues_and_resumes_with_the_reference_weights(
    fault_cluster: FaultCluster, demo_data: str, reference: Path, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    (job_id,) = submit(
        fault_cluster, fsdp_argv(write_job(tmp_path / "tiny.yaml"), demo_data, run_dir, STEPS, time=TIME_LIMIT)
    )
    # Between two scheduled checkpoints: without the stop's own checkpoint the resume would lose the steps since.
    preempted_at = wait_for_step(run_dir, CHECKPOINT_EVERY + 3)
    # On an idle machine the tiny model's last steps take less than Slurm takes to schedule the urgent job: the
    # ranks wait stopped until the preemption, as a long run would be training then; Slurm's kill sends SIGCONT
    # before SIGTERM (slurmd's _rpc_terminate_job).
    held = _stop_ranks(run_dir)
    try:
        urgent = fault_cluster.run(
            ["sbatch", "--parsable", "--partition=urgent", "--nodes=2", "--exclusive",
             f"--output={tmp_path / 'urgent.out'}", "--wrap", "true"]
        ).stdout.strip()  # fmt: skip
        assert wait_for_end(fault_cluster, urgent)["JobState"] == "COMPLETED"
    finally:
        _continue_ranks(held)
    wait_for_restart(fault_cluster, run_dir, job_id, 1)
    job = wait_for_end(fault_cluster, job_id, run_dir=run_dir)
    story = job_story(fault_cluster, run_dir, job_id)
    assert (job["JobState"], job["Restarts"]) == ("COMPLETED", "1"), story
    log = job_log(run_dir)
    assert "got SIGTERM (preempted): the training step got it too; requeueing after its stop" in log, story
    assert "stopped by SIGTERM (preempted; stopped on request (SIGTERM)); requeueing (restart 1, not a failure)" in log
    (resumed,) = resumed_steps(run_dir)
    assert resumed >= preempted_at, f"resumed from step {resumed}, preempted at {preempted_at}: steps were lost"
    _assert_ends_like_the_reference(run_dir, reference)


def _submit_refused(cluster: LocalSlurm, argv: list[str]) -> str:
    """llm-submit's one-line error for a submission it refuses (exit 2)."""
    saved = dict(os.environ)
    os.environ["SLURM_CONF"] = str(cluster.conf_path)
    err = io.StringIO()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = submit_main(argv)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert code == 2, err.getvalue()
    return err.getvalue().strip()


def test_the_same_job_submitted_twice_is_refused_at_submission_and_at_start(
    fault_cluster: FaultCluster, demo_data: str, reference: Path, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    argv = fsdp_argv(write_job(tmp_path / "tiny.yaml"), demo_data, run_dir, STEPS, time=TIME_LIMIT)
    (first,) = submit(fault_cluster, argv)
    # llm-submit: one line naming the run directory and the job that holds it; nothing written or submitted.
    refused = _submit_refused(fault_cluster, argv)
    assert refused.startswith(f"error: --run-dir: {run_dir} is in use by job {first} (")
    assert "\n" not in refused
    # The rendered script submitted again without llm-submit starts beside the first (two CPUs a node) and ends
    # at once, before it touches anything in the run directory.
    wait_for_step(run_dir, 3)
    second = fault_cluster.run(["sbatch", "--parsable", str(tmp_path / "run.fsdp.sbatch")]).stdout.strip()
    job = wait_for_end(fault_cluster, second)
    second_log = (run_dir / "logs" / f"fsdp-run-{second}.out").read_text()
    assert (job["JobState"], job["ExitCode"]) == ("FAILED", "3:0"), second_log
    assert f"refused: {run_dir} is in use by job {first} (" in second_log, second_log
    assert "step:" not in second_log  # no training step was started
    # The first job never noticed: it ends with the reference's losses and weights.
    job = wait_for_end(fault_cluster, first, run_dir=run_dir)
    assert (job["JobState"], job["Restarts"]) == ("COMPLETED", "0"), job_story(fault_cluster, run_dir, first)
    _assert_ends_like_the_reference(run_dir, reference)


def test_a_lease_left_by_a_killed_job_is_reclaimed_by_the_next(
    fault_cluster: FaultCluster, demo_data: str, reference: Path, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    argv = fsdp_argv(write_job(tmp_path / "tiny.yaml"), demo_data, run_dir, STEPS, time=TIME_LIMIT)
    (killed,) = submit(fault_cluster, argv)
    wait_until(lambda: _committed(run_dir, CHECKPOINT_EVERY), "the first scheduled checkpoint")
    os.kill(_batch_shell_pid(fault_cluster, killed, run_dir), signal.SIGKILL)
    job = wait_for_end(fault_cluster, killed, run_dir=run_dir)
    assert job["JobState"] == "FAILED", job_story(fault_cluster, run_dir, killed)
    assert (run_dir / ".lease").read_text().startswith(f"jobs={killed}\n"), "the killed job never gave it back"
    # The same command again: Slurm says the holder ended, so its lease is reclaimed and the run resumes.
    (again,) = submit(fault_cluster, argv)
    job = wait_for_end(fault_cluster, again, run_dir=run_dir)
    assert (job["JobState"], job["Restarts"]) == ("COMPLETED", "0"), job_story(fault_cluster, run_dir, again)
    assert resumed_steps(run_dir)[-1] >= CHECKPOINT_EVERY
    _assert_ends_like_the_reference(run_dir, reference)


def test_a_capacity_blocks_end_lowers_each_attempts_time_limit_at_its_start(
    fault_cluster: FaultCluster, demo_data: str, tmp_path: Path
) -> None:
    """--ends-at: the limit llm-submit sets counts from the start, so the script lowers it again when it starts."""
    run_dir = tmp_path / "run"
    ends_by = int(time.time()) + 20 * 60  # where EC2 starts terminating: 30 min before the block's end
    ends = datetime.fromtimestamp(ends_by + TERMINATION_LEAD_S, UTC).isoformat()
    argv = [
        *fsdp_argv(write_job(tmp_path / "tiny.yaml"), demo_data, run_dir, STEPS, time=TIME_LIMIT),
        "--ends-at",
        ends,
    ]
    (job_id,) = submit(fault_cluster, argv)
    line = re.compile(r"time limit (\d+) min: the Capacity Block's instances terminate at (\S+)")
    found = wait_until(lambda: line.search(job_log(run_dir)), "the script's time limit line")
    minutes = int(found.group(1))
    started = datetime.fromisoformat(fault_cluster.job(job_id)["StartTime"]).timestamp()
    assert (ends_by - started) // 60 - 1 <= minutes <= (ends_by - started) // 60 + 1
    assert found.group(2) == datetime.fromtimestamp(ends_by, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert fault_cluster.job(job_id)["TimeLimit"] == f"00:{minutes:02d}:00"
    fault_cluster.run(["scancel", job_id])
    wait_for_end(fault_cluster, job_id, run_dir=run_dir)


def test_a_requeue_by_scontrol_is_left_to_slurm_and_the_job_keeps_its_run_directory(
    fault_cluster: FaultCluster, demo_data: str, tmp_path: Path
) -> None:
    """`scontrol requeue` also sends TERM; the script neither requeues again nor gives the run directory back."""
    run_dir = tmp_path / "run"
    (job_id,) = submit(
        fault_cluster, fsdp_argv(write_job(tmp_path / "tiny.yaml"), demo_data, run_dir, STEPS, time=TIME_LIMIT)
    )
    wait_for_step(run_dir, 3)
    fault_cluster.run(["scontrol", "requeue", job_id])
    wait_for_restart(fault_cluster, run_dir, job_id, 1)
    log = job_log(run_dir)
    assert "got SIGTERM: requeued (scontrol requeue, or by Slurm); the job runs again by itself" in log
    assert "requeued while running (" in log and "not requeued" not in log
    assert (run_dir / ".lease").read_text().startswith(f"jobs={job_id}\n")
    fault_cluster.run(["scancel", job_id])
    wait_for_end(fault_cluster, job_id, run_dir=run_dir)


RESERVATION = "fault-resv"
# A requeued job that waits for good: held when Slurm purged its reservation (JobState RESV_DEL_HOLD, Reason
# "Reservation <name> was deleted"), or held (Priority 0) or waiting for a reservation that ended.
STUCK_REASONS = {"ReservationDeleted", "Reservation", "JobHeldAdmin", "JobHeldUser"}


def _logged_at(run_dir: Path, line: re.Pattern[str]) -> float:
    """The epoch second of the job script's first log line matching `line` (its `job[<UTC time>]: ` prefix)."""
    found = line.search(job_log(run_dir))
    assert found, line.pattern
    return datetime.strptime(found.group(1), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def _restarted_outside_the_reservation(cluster: FaultCluster, run_dir: Path, job_id: str) -> bool:
    """True once the job's second attempt has started; fails at once when the requeued job waits for good (held, or
    bound to the ended reservation) after its first attempt has ended, rather than after the wait's bound."""
    job = cluster.job(job_id)
    if attempt_started(run_dir, job_id, 1):
        return True
    held = job.get("Priority") == "0" or job.get("Reason") in STUCK_REASONS
    stuck = job.get("JobState") == "RESV_DEL_HOLD" or (job.get("JobState") == "PENDING" and held)
    assert not stuck, f"the requeued job waits for good: {job_story(cluster, run_dir, job_id)}"
    assert job.get("JobState") not in TERMINAL, f"ended, not requeued: {job_story(cluster, run_dir, job_id)}"
    return False


def test_a_reservations_end_saves_within_killwait_and_the_job_runs_again_outside_it(
    fault_cluster: FaultCluster, demo_data: str, reference: Path, tmp_path: Path
) -> None:
    """slurmctld ends a job whose advance reservation ends (ResvOverRun 0) as at its time limit: TERM, then KILL after
    KillWait. The step saves within KillWait, the script requeues the job without the ended reservation, and it runs
    again in the partition to the reference's losses and weights."""
    nodes = ",".join(fault_cluster.nodes)
    fault_cluster.run(["scontrol", "create", "reservation", f"reservationname={RESERVATION}", "starttime=now",
                       "duration=60", f"nodes={nodes}", "users=root"])  # fmt: skip
    held: list[int] = []
    try:
        run_dir = tmp_path / "run"
        argv = fsdp_argv(write_job(tmp_path / "tiny.yaml"), demo_data, run_dir, STEPS, time=TIME_LIMIT)
        (job_id,) = submit(fault_cluster, [*argv, f"--sbatch-arg=--reservation={RESERVATION}"])
        # Between two scheduled checkpoints: without the stop's own checkpoint the resume would lose the steps since.
        wait_for_step(run_dir, CHECKPOINT_EVERY + 3)
        assert fault_cluster.job(job_id).get("Reservation") == RESERVATION
        # slurmctld looks at reservations' ends every 30 s (PERIODIC_TIMEOUT), longer than the tiny model's 30 steps
        # take on an idle machine: the ranks wait stopped until slurmctld ends the job, as a long run would be training
        # then; its kill sends SIGCONT before SIGTERM (slurmd's _rpc_terminate_job).
        held += _stop_ranks(run_dir)
        ended_at_step = train_records(run_dir)[-1]["step"]
        fault_cluster.run(["scontrol", "update", f"reservation={RESERVATION}", "endtime=now"])
        ended_at = time.time()
        slurmctld_log = fault_cluster.log_dir / "slurmctld.log"
        wait_until(
            lambda: f"Reservation ended for JobId={job_id}" in slurmctld_log.read_text(errors="replace"),
            "slurmctld ending the job at its reservation's end",
        )
        wait_until(
            lambda: _restarted_outside_the_reservation(fault_cluster, run_dir, job_id),
            "the second attempt",
            story=lambda: job_story(fault_cluster, run_dir, job_id),
        )
        job = wait_for_end(fault_cluster, job_id, run_dir=run_dir)
        story = job_story(fault_cluster, run_dir, job_id)
        assert (job["JobState"], job["Restarts"]) == ("COMPLETED", "1"), story
        # The figures docs/jobs.md quotes: when TERM came, the steps the stop lost, when training went on.
        (resumed,) = resumed_steps(run_dir)
        termed_at = _logged_at(run_dir, re.compile(r"^job\[(\S+)\]: got SIGTERM", re.M))
        restarted_at = _logged_at(run_dir, re.compile(rf"^job\[(\S+)\]: job {job_id} \(.*\) restart 1;", re.M))
        records = train_records(run_dir)
        last_before = max(record["step"] for record in records if record["time"] < restarted_at)
        first_after = next(record for record in records if record["time"] > restarted_at)
        print(
            f"reservation end at step {ended_at_step}: TERM {termed_at - ended_at:.0f} s later, last step "
            f"{last_before}, resumed from step {resumed} ({last_before - resumed} steps lost), step "
            f"{first_after['step']} {first_after['time'] - ended_at:.0f} s after the end"
        )
        assert "Reservation" not in job, story
        log = job_log(run_dir)
        assert "got SIGTERM (reservation end): the training step got it too; requeueing after its stop" in log, story
        assert "stopped by SIGTERM (reservation end; stopped on request (SIGTERM)); requeueing (restart 1" in log, story
        assert f"the reservation {RESERVATION} has ended: requeued outside it, in partition local" in log, story
        assert resumed >= ended_at_step, f"resumed from step {resumed}, the reservation ended at {ended_at_step}"
        _assert_ends_like_the_reference(run_dir, reference)
    finally:
        _continue_ranks(held)
        fault_cluster.run(["scontrol", "delete", f"reservation={RESERVATION}"], check=False)


def test_a_job_that_requeues_itself_after_its_reservations_end_runs_again_outside_it(
    fault_cluster: FaultCluster, demo_data: str, reference: Path, tmp_path: Path
) -> None:
    """A stop of the job's own (USR1: the time-limit warning, or `scancel --signal=USR1 --batch`) that ends after its
    reservation has ended but before slurmctld has ended the job. The script takes the ended reservation off its
    requeued job where Slurm lets it in time; where it does not (a loaded controller: the job is not pending yet),
    Slurm holds the job, and the head node's timer (cluster/reservation_holds.py, run here at every poll as the timer
    would every minute) releases it. Either way it runs again outside the reservation and ends like the reference."""
    nodes = ",".join(fault_cluster.nodes)
    fault_cluster.run(["scontrol", "create", "reservation", f"reservationname={RESERVATION}", "starttime=now",
                       "duration=60", f"nodes={nodes}", "users=root"])  # fmt: skip
    held: list[int] = []
    released: list[str] = []
    timer = functools.partial(run_scontrol, environ=fault_cluster.env())

    def restarted() -> bool:
        released.extend(release_held_jobs(timer))
        if attempt_started(run_dir, job_id, 1):
            return True
        state = fault_cluster.job(job_id).get("JobState")
        assert state not in TERMINAL, f"ended, not requeued: {job_story(fault_cluster, run_dir, job_id)}"
        return False

    try:
        run_dir = tmp_path / "run"
        argv = fsdp_argv(write_job(tmp_path / "tiny.yaml"), demo_data, run_dir, STEPS, time=TIME_LIMIT)
        (job_id,) = submit(fault_cluster, [*argv, f"--sbatch-arg=--reservation={RESERVATION}"])
        wait_for_step(run_dir, CHECKPOINT_EVERY + 3)
        # The ranks wait stopped while the reservation ends and the stop request reaches them.
        held += _stop_ranks(run_dir)
        stopped_at_step = train_records(run_dir)[-1]["step"]
        fault_cluster.run(["scontrol", "update", f"reservation={RESERVATION}", "endtime=now"])
        fault_cluster.run(["scancel", "--signal=USR1", "--batch", job_id])
        wait_until(lambda: "got SIGUSR1; sending SIGUSR1 to the training step" in job_log(run_dir), "the stop request")
        _continue_ranks(held)
        wait_until(restarted, "the second attempt", story=lambda: job_story(fault_cluster, run_dir, job_id))
        job = wait_for_end(fault_cluster, job_id, run_dir=run_dir)
        story = job_story(fault_cluster, run_dir, job_id)
        assert (job["JobState"], job["Restarts"]) == ("COMPLETED", "1"), story
        assert "Reservation" not in job, story
        by_the_script = f"the reservation {RESERVATION} has ended: requeued outside it" in job_log(run_dir)
        by_the_timer = [line for line in released if line.startswith(f"job {job_id} ")]
        assert by_the_script or by_the_timer, story
        print(f"run again outside the reservation by {'the script' if by_the_script else 'the timer'}: {released}")
        (resumed,) = resumed_steps(run_dir)
        assert resumed >= stopped_at_step, f"resumed from step {resumed}, stopped at {stopped_at_step}"
        _assert_ends_like_the_reference(run_dir, reference)
    finally:
        _continue_ranks(held)
        fault_cluster.run(["scontrol", "delete", f"reservation={RESERVATION}"], check=False)
