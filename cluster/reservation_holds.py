"""Run again, outside it, a requeued job that Slurm holds because the reservation it names has ended.

A job requeued into a reservation (a Capacity Block, a maintenance window) keeps naming it. When the reservation ends
before the job runs again, Slurm never schedules the job: it waits held (`JobState=RESV_DEL_HOLD` once the reservation
is purged, an administrator's hold before that) until someone clears the reservation and releases it. A training job
requeues itself at every stop (launch/jobs/common.sh: requeue_job), and a job told to stop by the time-limit warning
just before a Capacity Block's end is requeued while the block still runs, so every block's end would leave the run
held. The job script clears an ended reservation itself, but Slurm takes the change only once the job is pending,
which is after the script has exited.

So the head node runs this every minute as root (a systemd timer, cluster/bootstrap/head_node.sh):

    python -m cluster.reservation_holds            # act, one line per job
    python -m cluster.reservation_holds --dry-run  # say what it would do

It acts only on a job that has run before (Restarts >= 1: a requeue, not a job that was submitted into the reservation
and never started): pending and naming a reservation whose end has passed, it takes the reservation off and releases
the job if it is held, unless by its owner (JobHeldUser); held by Slurm because the reservation was purged
(`RESV_DEL_HOLD`, which takes the name off the job), it releases it. Both are what the owner may do to their own
pending job, so it grants nothing: it does for them what they would do by hand (docs/jobs.md, "Advance
reservations").
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from spec.cli import user_errors

# `scontrol show ... -o`: one record a line, `Key=Value` pairs separated by spaces. Values of the keys read here hold
# no spaces; a free-text key (Comment, Reason with spaces) is never read past its own key.
_FIELD = re.compile(r"(?:^|\s)([A-Za-z]+)=(\S*)")

Scontrol = Callable[[Sequence[str]], str]


def parse_records(text: str) -> list[dict[str, str]]:
    """Records of `scontrol show job|reservation -o`, the first value of each key."""
    records = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("No "):  # "No jobs in the system", "No reservations in the system"
            continue
        record: dict[str, str] = {}
        for key, value in _FIELD.findall(line):
            record.setdefault(key, value)
        records.append(record)
    return records


@dataclass(frozen=True)
class HeldJob:
    job_id: str
    user: str
    reservation: str | None  # None: Slurm purged it and took it off the job (JobState=RESV_DEL_HOLD)
    release: bool  # False while the job is not held, or when its owner holds it: that hold stays theirs

    def describe(self) -> str:
        if self.reservation is None:
            return f"job {self.job_id} ({self.user}): held because its reservation was deleted; released"
        then = "released" if self.release else "left as it was (not held, or held by its owner)"
        return f"job {self.job_id} ({self.user}): reservation {self.reservation} has ended; taken off, {then}"


def ended_reservations(reservations: Sequence[Mapping[str, str]], names: set[str], now: float) -> set[str]:
    """Of `names`, those no reservation record has any more and those whose EndTime (epoch seconds) has passed."""
    live = {r["ReservationName"]: r.get("EndTime", "") for r in reservations if "ReservationName" in r}
    ended = set()
    for name in names:
        end = live.get(name)
        if end is None or (end.isdigit() and int(end) <= now):
            ended.add(name)
    return ended


def _requeued(job: Mapping[str, str]) -> bool:
    restarts = job.get("Restarts", "0")
    return restarts.isdigit() and int(restarts) >= 1


def held_jobs(
    jobs: Sequence[Mapping[str, str]], reservations: Sequence[Mapping[str, str]], now: float
) -> list[HeldJob]:
    """The requeued jobs that wait on a reservation that has ended: pending ones still naming it (its end passed,
    Slurm has not purged it yet) and those Slurm held when it purged it (RESV_DEL_HOLD, the name gone)."""
    naming = [
        job
        for job in jobs
        if job.get("JobState") == "PENDING"
        and job.get("Reservation", "(null)") not in ("", "(null)")
        and "," not in job["Reservation"]  # a job may name several; Slurm runs it in any that still runs
        and _requeued(job)
    ]
    ended = ended_reservations(reservations, {job["Reservation"] for job in naming}, now)
    found = [
        HeldJob(
            job_id=job["JobId"],
            user=job.get("UserId", "?"),
            reservation=job["Reservation"],
            release=job.get("Priority") == "0" and job.get("Reason") != "JobHeldUser",
        )
        for job in naming
        if job["Reservation"] in ended
    ]
    found += [
        HeldJob(job_id=job["JobId"], user=job.get("UserId", "?"), reservation=None, release=True)
        for job in jobs
        if job.get("JobState") == "RESV_DEL_HOLD" and _requeued(job)
    ]
    return found


def run_scontrol(arguments: Sequence[str], environ: Mapping[str, str] | None = None) -> str:
    """`scontrol ARGUMENTS` in `environ` (this process's by default, where SLURM_CONF may name the cluster)."""
    # Epoch seconds: EndTime compares without parsing a locale's date.
    environment = {**(os.environ if environ is None else environ), "SLURM_TIME_FORMAT": "%s"}
    result = subprocess.run(["scontrol", *arguments], capture_output=True, text=True, env=environment, check=False)
    if result.returncode != 0:
        raise ScontrolError(f"scontrol {' '.join(arguments)}: {(result.stderr or result.stdout).strip()}")
    return result.stdout


class ScontrolError(RuntimeError):
    pass


def release_held_jobs(scontrol: Scontrol = run_scontrol, now: float | None = None, dry_run: bool = False) -> list[str]:
    """One line per job acted on (or that failed); nothing when no job waits on an ended reservation."""
    jobs = parse_records(scontrol(["show", "job", "-o"]))
    reservations = parse_records(scontrol(["show", "reservation", "-o"]))
    lines = []
    for job in held_jobs(jobs, reservations, time.time() if now is None else now):
        if dry_run:
            lines.append(f"would act: {job.describe()}")
            continue
        try:
            if job.reservation is not None:
                scontrol(["update", f"JobId={job.job_id}", "Reservation="])
            if job.release:
                scontrol(["release", job.job_id])
        except ScontrolError as error:  # the job may have ended or changed meanwhile: the next pass looks again
            lines.append(f"job {job.job_id}: {error}")
            continue
        lines.append(job.describe())
    return lines


@user_errors
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cluster.reservation_holds", description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="say what would be done, change nothing")
    args = parser.parse_args(argv)
    try:
        lines = release_held_jobs(dry_run=args.dry_run)
    except ScontrolError as error:  # slurmctld not answering: the timer runs again in a minute
        print(f"reservation_holds: {error}", file=sys.stderr)
        return 1
    for line in lines:
        print(f"reservation_holds: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
