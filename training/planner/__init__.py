"""Capacity and cost planner: memory, FLOPs, communication, step time and cost of a training job.

Pure arithmetic over model shapes and instance facts; nothing here imports torch, so the job submitter can call
`fits(...)` on the head node. The CLI is `python -m training.plan`; the model is described in docs/planner.md.
"""

from training.planner.hardware import Hardware, HardwareError, hardware
from training.planner.job import Job, PlanError, Software
from training.planner.memory import MemoryEstimate, fits, memory_per_device
from training.planner.step_time import StepEstimate, estimate_step

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
