"""llm-submit's FP8 check: a job config's float8: section only where the backend reads it and the queue's chips run
the recipe, refused in one line before anything is queued (the trainer checks the device again when it starts)."""

from __future__ import annotations

from slurm.target import Target
from training.config import JobConfig
from training.quantization.config import capability_problem

# Backends whose job config's float8: section reaches the run. NeMo's FP8 is Megatron Bridge's recipe setting and
# NxDT's its own precision config: neither is rendered from this section yet, so it would be dropped without a word.
READS_FLOAT8 = ("fsdp",)


def float8_refusal(job: JobConfig, target: Target) -> str | None:
    """Why this job's float8 recipe cannot run on the target's backend and chips (one line), or None."""
    section = job.float8
    if not section.enabled:
        return None
    if target.backend.name not in READS_FLOAT8:
        return (
            f"float8.recipe: {section.recipe!r} is read by the fsdp backend only; backend {target.backend.name} "
            "would train without it. Use recipe 'off' there"
        )
    if target.local:
        return capability_problem(section, "cpu", None, "the local CPU cluster")
    chip = target.instance.chip
    capability = chip.cuda_capability if chip is not None else None
    device_type = "cuda" if capability is not None else target.instance.accelerator
    where = f"{target.instance.name} ({chip.name})" if chip is not None else target.instance.name
    return capability_problem(section, device_type, capability, where)
