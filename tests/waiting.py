"""Waiting on events in tests: poll a condition under a generous bound, and say what was awaited when it expires.

A loaded 2-core machine (CI beside another run, `make test-stress`) runs jobs and daemons several times slower
than an idle one, so bounds here are ceilings for a hung system, never estimates of how long the event takes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    condition: Callable[[], T],
    what: str,
    timeout_s: float = 600,
    story: Callable[[], str] | None = None,
    poll_s: float = 0.2,
) -> T:
    """The condition's first truthy value. Past `timeout_s` an AssertionError names `what` and ends with `story()`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            told = f"\n{story()}" if story is not None else ""
            raise AssertionError(f"waited {timeout_s:.0f} s for {what}{told}")
        time.sleep(poll_s)


def waits_on_a_lock(pid: int) -> bool:
    """True while process `pid` is blocked on a flock (/proc/locks lists a waiter as `N: -> FLOCK ADVISORY WRITE PID`)."""
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "->" in fields:
            at = fields.index("->")
            if fields[at + 1 : at + 2] == ["FLOCK"] and fields[at + 4 : at + 5] == [str(pid)]:
                return True
    return False
