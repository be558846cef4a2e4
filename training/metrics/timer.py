"""Step time without making the host wait: CUDA events on a GPU (read only when a step is logged), the wall clock
on a CPU (whose compute is synchronous anyway)."""

from __future__ import annotations

import time

import torch


class StepTimer:
    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self._start: float | torch.cuda.Event = 0.0
        self._end: float | torch.cuda.Event = 0.0

    def start(self) -> None:
        self._start = self._record()

    def stop(self) -> None:
        self._end = self._record()

    def _record(self) -> float | torch.cuda.Event:
        if not self.cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def seconds(self) -> float:
        """The last step's time; on a GPU this waits for the step's end event."""
        if isinstance(self._start, torch.cuda.Event) and isinstance(self._end, torch.cuda.Event):
            self._end.synchronize()
            return self._start.elapsed_time(self._end) / 1e3
        assert isinstance(self._start, float) and isinstance(self._end, float)
        return self._end - self._start
