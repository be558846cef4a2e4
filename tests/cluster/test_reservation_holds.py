"""cluster/reservation_holds.py: a requeued job that waits on an ended reservation runs again outside it.

The rules on records of `scontrol show job -o` as the local cluster printed them (slurm-wlm 22.05), then the command
itself against the local SLURM cluster: a job requeued into a reservation that ends is held by Slurm
(`RESV_DEL_HOLD`) until the command releases it, and a job that never ran there is left to its owner."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cluster.reservation_holds import HeldJob, held_jobs, parse_records, release_held_jobs
from cluster.verify.local_slurm import LocalSlurm
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
NOW = 1_800_000_000

# Abridged from the local cluster: a job requeued held into r1 (root's requeuehold), then the same once r1 was purged.
REQUEUED_HELD = (
    "JobId=7 JobName=wrap UserId=alice(1001) GroupId=alice(1001) Priority=0 Nice=0 JobState=PENDING "
    "Reason=job_requeued_in_held_state Dependency=(null) Requeue=1 Restarts=1 BatchFlag=1 Reservation=r1 Partition=local"
)
PURGED = (
    "JobId=7 JobName=wrap UserId=alice(1001) GroupId=alice(1001) Priority=0 Nice=0 JobState=RESV_DEL_HOLD "
    "Reason=Reservation_r1_was_deleted Dependency=(null) Requeue=1 Restarts=1 BatchFlag=1 Partition=local"
)


def _reservation(name: str, end: int) -> str:
    return f"ReservationName={name} StartTime={end - 3600} EndTime={end} Duration=01:00:00 Nodes=n[1-2] State=ACTIVE"


def _job(record: str, **changes: str) -> str:
    fields = dict(field.split("=", 1) for field in record.split(" "))
    return " ".join(f"{key}={value}" for key, value in {**fields, **changes}.items())


def test_records_read_as_scontrol_prints_them() -> None:
    (job,) = parse_records(REQUEUED_HELD + "\n")
    assert (job["JobId"], job["JobState"], job["Reservation"], job["Restarts"]) == ("7", "PENDING", "r1", "1")
    assert parse_records("No reservations in the system\n") == []


def test_a_requeued_job_naming_an_ended_reservation_is_taken_out_and_released() -> None:
    jobs = parse_records(REQUEUED_HELD)
    ended = parse_records(_reservation("r1", NOW - 1))
    assert held_jobs(jobs, ended, NOW) == [HeldJob("7", "alice(1001)", "r1", release=True)]
    # Gone already (purged between the two scontrol calls): ended too.
    assert held_jobs(jobs, [], NOW) == [HeldJob("7", "alice(1001)", "r1", release=True)]


def test_a_reservation_that_still_runs_keeps_its_jobs() -> None:
    jobs = parse_records(REQUEUED_HELD)
    assert held_jobs(jobs, parse_records(_reservation("r1", NOW + 60)), NOW) == []


def test_a_job_slurm_held_when_it_purged_the_reservation_is_released() -> None:
    assert held_jobs(parse_records(PURGED), [], NOW) == [HeldJob("7", "alice(1001)", None, release=True)]


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"Restarts": "0"}, []),  # submitted into the reservation, never ran: its owner decides
        ({"Reservation": "r1,r2"}, []),  # several: Slurm runs it in any that still runs
        ({"JobState": "RUNNING"}, []),
        ({"Reason": "JobHeldUser"}, [HeldJob("7", "alice(1001)", "r1", release=False)]),  # its owner's hold stays
        ({"Priority": "4294901758", "Reason": "Resources"}, [HeldJob("7", "alice(1001)", "r1", release=False)]),
    ],
)
def test_what_is_left_alone(changes: dict[str, str], expected: list[HeldJob]) -> None:
    jobs = parse_records(_job(REQUEUED_HELD, **changes))
    assert held_jobs(jobs, parse_records(_reservation("r1", NOW - 1)), NOW) == expected


def test_a_failed_scontrol_is_one_line_and_the_next_job_is_still_done() -> None:
    calls: list[list[str]] = []

    def scontrol(arguments: list[str]) -> str:
        calls.append(list(arguments))
        if arguments[:2] == ["show", "job"]:
            return f"{_job(PURGED, JobId='7')}\n{_job(PURGED, JobId='8')}\n"
        if arguments[:2] == ["show", "reservation"]:
            return "No reservations in the system\n"
        if arguments == ["release", "7"]:
            from cluster.reservation_holds import ScontrolError

            raise ScontrolError("scontrol release 7: Invalid job id specified")
        return ""

    assert release_held_jobs(scontrol, now=NOW) == [
        "job 7: scontrol release 7: Invalid job id specified",
        "job 8 (alice(1001)): held because its reservation was deleted; released",
    ]
    assert ["release", "8"] in calls


@pytest.mark.slurm
def test_a_job_requeued_into_a_reservation_that_ends_runs_again_outside_it(
    local_slurm: LocalSlurm, tmp_path: Path
) -> None:
    reservation = "holds-test"
    local_slurm.run(["scontrol", "create", "reservation", f"reservationname={reservation}", "starttime=now",
                     "duration=60", "nodes=ALL", "users=root"])  # fmt: skip

    submitted: list[str] = []

    def sbatch(*extra: str) -> str:
        argv = ["sbatch", "--parsable", f"--reservation={reservation}", "-N", "1", "-o", str(tmp_path / "%j.out")]
        submitted.append(local_slurm.run([*argv, *extra, "--wrap", "sleep 600"]).stdout.strip())
        return submitted[-1]

    def command(*arguments: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "cluster.reservation_holds", *arguments], cwd=REPO,
                              env=local_slurm.env(), capture_output=True, text=True, check=False)  # fmt: skip

    try:
        requeued = sbatch("--requeue")
        never_ran = sbatch("--hold")
        wait_until(lambda: local_slurm.job(requeued).get("JobState") == "RUNNING", "the job to run in the reservation")
        # As a job's own stop does just before a Capacity Block's end: requeued (held, as requeue_job does) while the
        # reservation still runs.
        local_slurm.run(["scontrol", "requeuehold", requeued])
        wait_until(lambda: local_slurm.job(requeued).get("Restarts") == "1", "the requeue")
        assert command().stdout == ""  # the reservation still runs: nothing to do
        local_slurm.run(["scontrol", "update", f"reservation={reservation}", "endtime=now"])
        wait_until(lambda: local_slurm.job(requeued).get("JobState") == "RESV_DEL_HOLD", "Slurm's hold at the purge")

        dry = command("--dry-run")
        assert dry.returncode == 0 and local_slurm.job(requeued)["JobState"] == "RESV_DEL_HOLD", dry.stderr
        assert (
            dry.stdout
            == f"reservation_holds: would act: job {requeued} (root(0)): held because its reservation was deleted; released\n"
        )

        done = command()
        assert done.returncode == 0, done.stderr
        assert (
            done.stdout
            == f"reservation_holds: job {requeued} (root(0)): held because its reservation was deleted; released\n"
        )
        job = wait_until(lambda: (j := local_slurm.job(requeued)).get("JobState") == "RUNNING" and j, "the job to run")
        assert "Reservation" not in job and job["Partition"] == "local"
        assert local_slurm.job(never_ran)["JobState"] == "RESV_DEL_HOLD"  # its owner's to decide
        assert command().stdout == ""  # idempotent: the next timer pass finds nothing
    finally:
        local_slurm.run(["scancel", *submitted], check=False)
        local_slurm.run(["scontrol", "delete", f"reservation={reservation}"], check=False)
