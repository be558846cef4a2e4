"""checkpoint.every at submission: a job that leaves it unset gets the plan's interval (planner.checkpoint_interval:
Young's, from the planned save time and the fleet's failure rate), written into the rendered job, so every backend
saves at it. A number or 'off' is the user's and is kept.

Without a plan (the local cluster, a spec without FSx, a step the planner cannot time) the job keeps it unset and
the trainer saves every UNSET_EVERY_STEPS steps.
"""

from __future__ import annotations

from planner.checkpoint_interval import checkpoint_interval
from planner.stop_window import StopWindow
from slurm.target import Target
from training.config import UNSET_EVERY_STEPS, JobConfig


def with_planned_interval(
    job: JobConfig, window: StopWindow | None, target: Target, nodes: int
) -> tuple[JobConfig, str | None]:
    """The job with checkpoint.every filled in where it was unset, and the note llm-submit prints about it."""
    if job.checkpoint.every is not None:
        return job, None
    accelerators = target.instance.accelerators_per_node * nodes
    interval = None if window is None else checkpoint_interval(window.save_s, window.step_s, accelerators)
    if interval is None:
        return job, (
            f"checkpoint.every: unset and no plan here; the trainer saves every {UNSET_EVERY_STEPS} steps "
            "(set a number, or 'off')"
        )
    return job.with_overrides(**{"checkpoint.every": interval.steps}), interval.summary()
