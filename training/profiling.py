"""A window of steps traced with torch.profiler, written as a Chrome trace (chrome://tracing, Perfetto)."""

from __future__ import annotations

import logging
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

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

    @property
    def last_step(self) -> int | None:
        start = self.section.start_step
        return None if start is None else start + self.section.steps - 1

    def before_step(self, step: int) -> None:
        if self.section.start_step is not None and step == self.section.start_step:
            self._profiler = profile(activities=self.activities, record_shapes=True, profile_memory=True)
            self._profiler.start()

    def after_step(self, step: int) -> Path | None:
        if self._profiler is None or step != self.last_step:
            return None
        return self._finish(step)

    def _finish(self, step: int) -> Path:
        assert self._profiler is not None
        self._profiler.stop()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        trace = self.out_dir / f"rank{self.rank}_steps{self.section.start_step}-{step}.json"
        self._profiler.export_chrome_trace(str(trace))
        self._profiler = None
        log.info("profile: wrote %s", trace)
        return trace

    def close(self, step: int) -> None:
        """A run that ends inside the window still writes what it traced."""
        if self._profiler is not None:
            self._finish(step)
