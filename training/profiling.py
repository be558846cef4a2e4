"""A window of steps traced with torch.profiler, written as a Chrome trace (chrome://tracing, Perfetto).

As torchtitan does it: a schedule with `warmup` untraced-but-profiled steps before the window (the first steps of
a profiler pay its start-up cost, which would otherwise land in the trace), the window itself, then stop. Memory
records (allocations per op) only on rank 0: they cost time and every rank's would be alike.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, schedule

from training.config import ProfileSection

log = logging.getLogger("training")
PROFILE_DIR = "profile"


class StepProfiler:
    """Traces steps start_step .. start_step + steps - 1 into DIR/profile/rank{r}_steps{a}-{b}.json."""

    def __init__(self, section: ProfileSection, run_dir: Path, rank: int, device: torch.device) -> None:
        self.section = section
        self.out_dir = run_dir / PROFILE_DIR
        self.rank = rank
        self.activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
        self._profiler: profile | None = None
        self._trace: Path | None = None
        start = section.start_step
        self._first = None if start is None else max(1, start - section.warmup)

    @property
    def last_step(self) -> int | None:
        start = self.section.start_step
        return None if start is None else start + self.section.steps - 1

    def before_step(self, step: int) -> None:
        if self._first is None or step != self._first:
            return
        assert self.section.start_step is not None
        warmup = self.section.start_step - self._first
        self._trace = self.out_dir / f"rank{self.rank}_steps{self.section.start_step}-{self.last_step}.json"
        main = self.rank == 0
        self._profiler = profile(
            activities=self.activities,
            schedule=schedule(wait=0, warmup=warmup, active=self.section.steps, repeat=1),
            on_trace_ready=self._export,
            record_shapes=main,
            profile_memory=main,
        )
        self._profiler.start()

    def _export(self, profiler: profile) -> None:
        assert self._trace is not None
        self.out_dir.mkdir(parents=True, exist_ok=True)
        profiler.export_chrome_trace(str(self._trace))
        log.info("profile: wrote %s", self._trace)

    def after_step(self, step: int) -> Path | None:
        if self._profiler is None:
            return None
        self._profiler.step()
        if step != self.last_step:
            return None
        return self._finish()

    def _finish(self) -> Path | None:
        assert self._profiler is not None
        self._profiler.stop()
        self._profiler = None
        return self._trace if self._trace is not None and self._trace.is_file() else None

    def close(self, step: int) -> None:
        """A run that ends inside the window still writes what it traced."""
        if self._profiler is None or self.section.start_step is None or step < self.section.start_step:
            if self._profiler is not None:
                self._profiler.stop()
                self._profiler = None
            return
        self._trace = self.out_dir / f"rank{self.rank}_steps{self.section.start_step}-{step}.json"
        self._finish()
