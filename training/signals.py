"""Stop requests (SIGTERM, SIGUSR1) and the exit codes a job wrapper acts on.

A signal only sets a flag; the trainer finishes the step it is in, all ranks agree on stopping, it writes a
checkpoint and exits with EXIT_REQUEUE, which the SLURM wrapper (cluster/) turns into a requeue. Under torchrun
the launcher replaces worker exit codes with its own, so rank 0 also writes RUN_DIR/exit_status.json.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from types import FrameType
from typing import Any

EXIT_OK = 0
EXIT_CONFIG_ERROR = 2
EXIT_REQUEUE = 42  # stopped on request after a checkpoint; run the same command again to resume
EXIT_LOSS_GUARD = 43  # non-finite or spiking loss; the last good checkpoint was kept, the bad state never saved
EXIT_CHECKPOINT_FAILED = 44  # a save failed or would not fit; training stopped rather than go on unsaved
EXIT_HANG = 45  # a step outlasted the hang watchdog's bound (training/watchdog.py); requeued off the suspect nodes
EXIT_NOT_OWNED = 46  # the run directory or a checkpoint is not the job user's (training/checkpoint/ownership.py)
EXIT_STATUS_FILE = "exit_status.json"

STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)


class StopRequest:
    """Remembers the first stop signal received; `install()` replaces the handlers for STOP_SIGNALS."""

    def __init__(self) -> None:
        self.signal_name: str | None = None
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        for signum in STOP_SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)

    def uninstall(self) -> None:
        """Put back the handlers that were there before (the trainer may run inside a larger program)."""
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signal_name is None:
            self.signal_name = signal.Signals(signum).name

    @property
    def requested(self) -> bool:
        return self.signal_name is not None


def write_exit_status(run_dir: Path, code: int, reason: str, step: int | None) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    status = {"exit_code": code, "reason": reason, "step": step, "time": round(time.time(), 3)}
    (run_dir / EXIT_STATUS_FILE).write_text(json.dumps(status) + "\n", encoding="utf-8")
