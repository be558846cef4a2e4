"""The hang watchdog: its bound, and a real two-rank torchrun run with one rank stopped (SIGSTOP) mid-run."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
from pathlib import Path

import pytest

from tests.training.jobs import records, start_training, tiny_job, wait_for_step, write_job
from training.config import ConfigError, WatchdogSection, parse_job_config
from training.signals import EXIT_HANG, EXIT_STATUS_FILE
from training.watchdog import (
    HANG_DIR,
    REPORT_FILE,
    SUSPECT_NODES_FILE,
    hang_bound_s,
    hang_watchdog_note,
    with_planned_step,
)


def test_the_bound_is_the_floor_until_steps_are_timed_then_factor_times_the_median_step() -> None:
    section = WatchdogSection(floor_s=20, factor=10)
    assert hang_bound_s(section, [], sync_every=1) == 20
    assert hang_bound_s(section, [2.0, 9.0, 3.0], sync_every=1) == 30  # the median, not the outlier
    assert hang_bound_s(section, [0.5, 0.5], sync_every=1) == 20  # never below the floor
    # The host waits for the device only at logged steps: one step may carry log_every steps of device time.
    assert hang_bound_s(section, [2.0], sync_every=10) == 200


def test_the_planned_step_time_counts_when_it_is_the_longer() -> None:
    section = WatchdogSection(floor_s=10, factor=4, planned_step_s=5.0)
    assert hang_bound_s(section, [], sync_every=1) == 20  # known before the first step is timed
    assert hang_bound_s(section, [2.0], sync_every=1) == 20
    assert hang_bound_s(section, [8.0], sync_every=1) == 32


def test_a_bad_watchdog_setting_is_one_line_naming_the_field(demo_data_prefix: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_job_config(tiny_job(demo_data_prefix, watchdog={"factor": 0.5}))
    (line,) = str(raised.value).splitlines()
    assert "watchdog.factor: 0.5" in line and "greater than 1" in line


def _worker_of_rank(launcher_pid: int, rank: int) -> int:
    """The torchrun worker with RANK=rank (a child of the launcher)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            environ = (proc / "environ").read_bytes()
        except (OSError, ValueError):
            continue
        if parent == launcher_pid and f"\0RANK={rank}\0".encode() in b"\0" + environ:
            return int(proc.name)
    raise AssertionError(f"no rank {rank} worker under {launcher_pid}")


@pytest.mark.distributed
def test_a_stopped_rank_ends_the_run_with_the_live_ranks_traces_and_names_its_node(
    demo_data_prefix: str, tmp_path: Path
) -> None:
    """Three ranks, the middle one stopped: both live ranks report, and the lowest names the silent one before any
    live rank's exit ends the others."""
    watchdog = {"floor_s": 15, "factor": 10, "report_grace_s": 5}
    data = {"micro_batch_size": 2, "global_batch_size": 6}
    job = tiny_job(
        demo_data_prefix, data=data, train={"max_steps": 100_000}, checkpoint={"every": "off"}, watchdog=watchdog
    )
    run_dir = tmp_path / "run"
    process = start_training(write_job(tmp_path / "job.yaml", job), run_dir, ranks=3)
    stopped = None
    try:
        wait_for_step(run_dir, 3, process)
        stopped = _worker_of_rank(process.pid, 1)
        os.kill(stopped, signal.SIGSTOP)  # rank 1 stops mid-run; its own watchdog cannot run
        output, _ = process.communicate(timeout=600)  # the event: the live ranks' watchdogs end the run
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        if stopped is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(stopped, signal.SIGKILL)
    status = json.loads((run_dir / EXIT_STATUS_FILE).read_text())
    assert status["exit_code"] == EXIT_HANG, output[-3000:]
    last_step = max(record["step"] for record in records(run_dir, "train"))
    assert status["step"] == last_step  # the last step every rank finished
    assert "rank 1 on " in status["reason"] and "sent no report" in status["reason"], status
    report = json.loads((run_dir / HANG_DIR / REPORT_FILE).read_text())
    assert (report["reported_ranks"], report["silent_ranks"]) == ([0, 2], [1])
    assert report["bound_s"] >= 15
    assert (run_dir / HANG_DIR / SUSPECT_NODES_FILE).read_text() == f"{socket.gethostname()}\n"
    # Each live rank's stack traces, in the output and beside the report: it waited in a collective of the step.
    for rank in (0, 2):
        assert f"---- rank {rank} (" in output, output[-3000:]
        trace = (run_dir / HANG_DIR / f"rank-{rank}.traceback").read_text()
        assert "most recent call first" in trace and "training/trainer.py" in trace and "_train_step" in trace
    assert "over the watchdog bound" in output
    assert not (run_dir / HANG_DIR / "rank-1.json").exists()


def test_the_planners_step_time_is_taken_unless_the_job_names_its_own(demo_data_prefix: str) -> None:
    job = parse_job_config(tiny_job(demo_data_prefix))
    assert with_planned_step(job, 4.0).watchdog.planned_step_s == 4.0
    own = parse_job_config(tiny_job(demo_data_prefix, watchdog={"planned_step_s": 7.0}))
    assert with_planned_step(own, 4.0).watchdog.planned_step_s == 7.0
    assert hang_watchdog_note(with_planned_step(job, 40.0)).startswith("hang watchdog: a step over 400 s ends the job")
    off = parse_job_config(tiny_job(demo_data_prefix, watchdog={"enabled": False}))
    assert hang_watchdog_note(off).startswith("hang watchdog: off")
