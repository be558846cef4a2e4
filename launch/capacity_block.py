"""--ends-at: a Capacity Block's end time, as the job's time limit.

EC2 begins terminating the instances of a Capacity Block 30 minutes before its end time: its EventBridge warning
comes 40 minutes before the end and says they "will begin to terminate in 10 minutes" (EC2 User Guide, "Monitor
Capacity Blocks using EventBridge"). A job in a block must therefore end, its stop's checkpoint written, by then:
its time limit ends there, and SLURM's USR1 comes the signal lead before it (launch.signal_lead). The limit set at
submission counts from the job's start, so each attempt trims it again when it starts (launch/jobs/common.sh
trim_time_limit), however long it waited in the queue.
"""

from __future__ import annotations

import time
from datetime import datetime

from slurm.errors import SubmitError
from slurm.submission import parse_time

TERMINATION_LEAD_S = 30 * 60


def parse_ends_at(text: str) -> int:
    """The epoch second EC2 starts terminating the block's instances: its end time less TERMINATION_LEAD_S."""
    try:
        ends = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise SubmitError(f"--ends-at: {text!r} is not an ISO 8601 time (2026-12-01T11:30:00Z)") from None
    if ends.tzinfo is None:
        raise SubmitError(f"--ends-at: {text!r} has no time zone; write it as EC2 shows it (2026-12-01T11:30:00Z)")
    return int(ends.timestamp()) - TERMINATION_LEAD_S


def slurm_time(seconds: int) -> str:
    """[D-]HH:MM:SS, whole minutes (SLURM's resolution), rounded down."""
    minutes = seconds // 60
    days, minutes = divmod(minutes, 24 * 60)
    hours, minutes = divmod(minutes, 60)
    return (f"{days}-" if days else "") + f"{hours:02d}:{minutes:02d}:00"


def block_time_limit(ends_by: int, given: str | None, lead_s: int, now: float | None = None) -> str:
    """The job's --time in a block ending its instances at `ends_by`: the time left, or `given` when shorter.
    Refused when what is left cannot hold more than the stop itself."""
    left = int(ends_by - (time.time() if now is None else now))
    if left <= lead_s + 60:
        raise SubmitError(
            f"--ends-at: the block's instances terminate in {max(left, 0)} s (30 min before its end), not more than "
            f"the {lead_s} s signal lead a stop needs; submit to the next block"
        )
    if given is not None and parse_time(given) <= left:
        return given
    return slurm_time(left)
