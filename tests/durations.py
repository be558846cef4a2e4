"""Where the suite's time goes: seconds per test file and per test folder, and each worker's busy time.

Every run writes build/test-durations.json (setup + call + teardown of each test, summed by file, as pytest
reports them; under xdist the controller collects every worker's reports) and prints the slowest files. The
figures fill docs/testing.md's per-group table and check tests/scheduling.py's order.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.scheduling import file_of

REPO = Path(__file__).resolve().parents[1]
REPORT = REPO / "build" / "test-durations.json"
SHOWN = 15


def group_of(path: str) -> str:
    """A file's folder under tests/ (tests/launch/test_x.py -> tests/launch); top-level files are `tests`."""
    parts = path.split("/")
    return "/".join(parts[:2]) if len(parts) > 2 else parts[0]


class Durations:
    """A pytest plugin: sums each report's duration by file and by worker."""

    def __init__(self, report_path: Path = REPORT) -> None:
        self.report_path = report_path
        self.started = time.monotonic()
        self.by_file: dict[str, float] = defaultdict(float)
        self.by_worker: dict[str, float] = defaultdict(float)
        self.tests_by_file: dict[str, int] = defaultdict(int)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        path = file_of(report.nodeid.split("@", 1)[0])
        self.by_file[path] += report.duration
        node = getattr(report, "node", None)  # the xdist worker that ran it (on the controller)
        worker = getattr(getattr(node, "gateway", None), "id", "main")
        self.by_worker[str(worker)] += report.duration
        if report.when == "call" or (report.when == "setup" and report.skipped):
            self.tests_by_file[path] += 1

    def summary(self) -> dict[str, Any]:
        groups: dict[str, float] = defaultdict(float)
        for path, seconds in self.by_file.items():
            groups[group_of(path)] += seconds
        return {
            "wall_s": round(time.monotonic() - self.started, 1),
            "workers_s": {name: round(s, 1) for name, s in sorted(self.by_worker.items())},
            "groups_s": {name: round(s, 1) for name, s in sorted(groups.items(), key=lambda kv: -kv[1])},
            "files": [
                {"file": path, "seconds": round(seconds, 2), "tests": self.tests_by_file[path]}
                for path, seconds in sorted(self.by_file.items(), key=lambda kv: -kv[1])
            ],
        }

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.by_file:
            return
        summary = self.summary()
        self.report_path.parent.mkdir(parents=True, exist_ok=True)
        self.report_path.write_text(json.dumps(summary, indent=1) + "\n")
        shown = self.report_path.relative_to(REPO) if self.report_path.is_relative_to(REPO) else self.report_path
        terminalreporter.write_sep("=", f"slowest test files (all in {shown})")
        for row in summary["files"][:SHOWN]:
            terminalreporter.write_line(f"{row['seconds']:9.1f} s  {row['tests']:4d} tests  {row['file']}")
        busy = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in summary["workers_s"].items())
        terminalreporter.write_line(f"wall {summary['wall_s']:.0f} s; busy per worker: {busy}")
