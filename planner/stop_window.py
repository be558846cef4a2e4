"""How long a time-limit stop needs: the step in flight, then the stop's checkpoint written to shared storage,
before SLURM kills the step at the time limit. llm-submit derives --signal-lead from it and refuses a shorter one
(docs/jobs.md, "How long a stop takes").

    lead >= step time + checkpoint bytes / storage throughput + exit margin

An asynchronous save (checkpoint.async_save) only moves the periodic saves off the training loop: a stop waits for
its save to be durable before the step exits, so the write counts in full on every backend.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from slurm.backends import backend_named
from spec.cluster import STOP_EXIT_MARGIN_S, FsxSpec
from training.models.args import ModelArgs
from training.models.params import count_parameters

# Processes leaving, the exit-status file, the requeue itself (the cluster's KillWait counts it too).
EXIT_MARGIN_S = STOP_EXIT_MARGIN_S
MB = 1_000_000


def storage_mb_per_s(fsx: FsxSpec) -> float:
    """The file system's baseline throughput: storage (TiB) x throughput per TiB."""
    return fsx.baseline_mb_per_s()


@dataclass(frozen=True)
class StopWindow:
    checkpoint_bytes: int
    storage_mb_per_s: float
    step_s: float

    @property
    def save_s(self) -> float:
        return self.checkpoint_bytes / (self.storage_mb_per_s * MB)

    @property
    def lead_s(self) -> int:
        """The shortest --signal-lead that fits, in whole seconds."""
        return math.ceil(self.step_s + self.save_s + EXIT_MARGIN_S)

    def summary(self) -> str:
        return (
            f"step {self.step_s:.0f} s + checkpoint {self.checkpoint_bytes / 1e9:.0f} GB at "
            f"{self.storage_mb_per_s:.0f} MB/s ({self.save_s:.0f} s) + exit {EXIT_MARGIN_S:.0f} s = {self.lead_s} s"
        )


def stop_window(model: ModelArgs, backend: str, fsx: FsxSpec, step_s: float) -> StopWindow:
    """`backend`: a name or --backend option (slurm.backends); its descriptor says what a checkpoint holds."""
    checkpoint = count_parameters(model).total * backend_named(backend).checkpoint_bytes_per_param
    return StopWindow(checkpoint, storage_mb_per_s(fsx), step_s)
