"""How often a job should checkpoint: Young's interval from the planned save time and the fleet's failure rate.

    interval = sqrt(2 x save time x fleet MTBF)          (Young 1974; Daly 2006 adds terms of order save/MTBF)
    fleet MTBF = 1 / (accelerators x failures per accelerator-hour)

Saving more often spends more time writing; less often loses more work per failure. The rate is Meta's for Llama 3
405B: 419 unexpected interruptions in a 54-day snapshot on 16,384 H100 GPUs ("The Llama 3 Herd of Models", 2024,
section 3.3.4), 78% of them hardware. llm-plan prints the interval; llm-submit writes it into a job whose
checkpoint.every is unset (docs/checkpointing.md, "How often to checkpoint").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

LLAMA3_UNEXPECTED_INTERRUPTIONS = 419
LLAMA3_GPUS = 16_384
LLAMA3_SNAPSHOT_HOURS = 54 * 24
FAILURES_PER_ACCELERATOR_HOUR = LLAMA3_UNEXPECTED_INTERRUPTIONS / (LLAMA3_GPUS * LLAMA3_SNAPSHOT_HOURS)
FAILURE_RATE_SOURCE = "Llama 3 pre-training: 419 unexpected interruptions in 54 days on 16,384 H100s (Meta, 2024)"


def fleet_mtbf_s(accelerators: int, failures_per_accelerator_hour: float = FAILURES_PER_ACCELERATOR_HOUR) -> float:
    """Mean time between failures of a job on `accelerators` GPUs or Trainium chips, any one failing ending it."""
    return 3600.0 / (accelerators * failures_per_accelerator_hour)


def young_interval_s(save_s: float, mtbf_s: float) -> float:
    return math.sqrt(2.0 * save_s * mtbf_s)


@dataclass(frozen=True)
class CheckpointInterval:
    save_s: float
    step_s: float
    accelerators: int
    mtbf_s: float

    @property
    def interval_s(self) -> float:
        return young_interval_s(self.save_s, self.mtbf_s)

    @property
    def steps(self) -> int:
        """checkpoint.every: the interval in whole steps, at least one."""
        return max(1, round(self.interval_s / self.step_s))

    def summary(self) -> str:
        return (
            f"checkpoint every {self.steps} steps ({self.interval_s / 3600:.1f} h): sqrt(2 x save {self.save_s:.0f} s "
            f"x fleet MTBF {self.mtbf_s / 3600:.0f} h for {self.accelerators} accelerators at "
            f"{FAILURES_PER_ACCELERATOR_HOUR:.2e} failures per accelerator-hour); a crash costs at most {self.steps} "
            f"steps, {self.steps / 2:.0f} on average"
        )

    def as_json(self) -> dict[str, float | int | str]:
        return {
            "every_steps": self.steps,
            "interval_s": self.interval_s,
            "save_s": self.save_s,
            "step_s": self.step_s,
            "accelerators": self.accelerators,
            "fleet_mtbf_s": self.mtbf_s,
            "failures_per_accelerator_hour": FAILURES_PER_ACCELERATOR_HOUR,
            "failure_rate_source": FAILURE_RATE_SOURCE,
        }


def checkpoint_interval(save_s: float, step_s: float, accelerators: int) -> CheckpointInterval | None:
    """None where the planner cannot time a step (there is nothing to count the interval in)."""
    if step_s <= 0 or save_s <= 0 or accelerators < 1:
        return None
    return CheckpointInterval(save_s, step_s, accelerators, fleet_mtbf_s(accelerators))
