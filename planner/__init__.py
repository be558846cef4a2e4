"""Capacity and cost planner: memory, FLOPs, communication, step time and cost of a training job.

Pure arithmetic over model shapes and instance facts; nothing here imports torch, so the job submitter calls it on
the head node (through planner.job_config, the one mapping from a job config). The CLI is `python -m planner.plan`; the model is described in docs/planner.md.
"""

from planner.hardware import Hardware, HardwareError, hardware
from planner.job import Job, PlanError, Software
from planner.memory import MemoryEstimate, fits, memory_per_device
from planner.step_time import StepEstimate, estimate_step

__all__ = [
    "Hardware",
    "HardwareError",
    "Job",
    "MemoryEstimate",
    "PlanError",
    "Software",
    "StepEstimate",
    "estimate_step",
    "fits",
    "hardware",
    "memory_per_device",
]
