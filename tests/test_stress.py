"""The stress runner's reading of pytest's report and its verdict (the rounds themselves run in `make test-stress`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.stress import HOG, Round, read_junit, report, start_hogs, stop_hogs

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.launch.test_backends_slurm" name="test_ok" time="1"/>
<testcase classname="tests.launch.test_backends_slurm" name="test_requeue" time="2">
  <failure message="AssertionError: job 8 never ran attempt 2">job 8 story line 1
---- job 8: the script's decisions ----
job[..]: requeueing (restart 1, not a failure)</failure></testcase>
<testcase classname="tests.cluster.test_local_slurm" name="test_skip" time="0"><skipped message="needs root"/></testcase>
</testsuite></testsuites>"""


def test_a_round_counts_from_the_junit_report_and_keeps_each_failures_story(tmp_path: Path) -> None:
    (tmp_path / "round-1.xml").write_text(JUNIT)
    result = read_junit(tmp_path / "round-1.xml", 1, 12.0, 1)
    assert (result.passed, result.skipped, result.ran, result.ok) == (1, 1, 2, False)
    ((test_id, text),) = result.failures
    assert test_id == "tests.launch.test_backends_slurm::test_requeue"
    assert "never ran attempt 2" in text and "requeueing (restart 1, not a failure)" in text
    printed = report([result, Round(2, 10.0, 0, passed=2)], hogs=2)
    assert "==== round 1: FAILED tests.launch.test_backends_slurm::test_requeue" in printed
    assert printed.endswith("stress: 1 of 2 rounds passed, 2 tests run per round, under 2 busy loops on "
                            f"{__import__('os').cpu_count()} cores")  # fmt: skip


def test_a_round_that_ran_nothing_or_wrote_no_report_fails(tmp_path: Path) -> None:
    assert not Round(1, 1.0, 5).ok  # pytest's "no tests ran"
    missing = read_junit(tmp_path / "absent.xml", 1, 1.0, 4)
    assert not missing.ok and "ended with 4 before writing it" in missing.failures[0][1]


def test_the_busy_loops_are_real_processes_that_stop_and_end_by_themselves() -> None:
    hogs = start_hogs(2, 3600)
    try:
        assert all(hog.poll() is None for hog in hogs)
    finally:
        stop_hogs(hogs)
    assert all(hog.returncode is not None for hog in hogs)
    bounded = subprocess.run([sys.executable, "-c", HOG.format(seconds=0)], timeout=600, check=False)
    assert bounded.returncode == 0
