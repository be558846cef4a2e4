"""llm-submit's FP8 check: a job config's float8: section only where the backend reads it and the queue's chips run
the recipe, refused in one line before anything is queued (the trainer checks the device again when it starts)."""

from __future__ import annotations

from launch.bridge import BRIDGE_FP8_PRESETS
from slurm.target import Target
from spec.platform.instances import GPUS
from training.config import JobConfig
from training.quantization.config import capability_problem

# Backends whose job config's float8: section reaches the run: the trainer (torchao) and Megatron Bridge (its
# TransformerEngine presets, launch/bridge.py). NeMo 2's recipes and NxDT are not rendered from it, so they refuse it
# rather than train without a word in bf16.
READS_FLOAT8 = ("fsdp", "bridge")


def float8_refusal(job: JobConfig, target: Target) -> str | None:
    """Why this job's float8 recipe cannot run on the target's backend and chips (one line), or None."""
    section = job.float8
    if not section.enabled:
        return None
    if target.backend.name not in READS_FLOAT8:
        return (
            f"float8.recipe: {section.recipe!r} is read by the fsdp and bridge backends only; backend "
            f"{target.backend.name} would train without it. Use recipe 'off' there"
        )
    if target.backend.name == "bridge" and section.recipe not in BRIDGE_FP8_PRESETS:
        return (
            f"float8.recipe: {section.recipe!r} has no Megatron Bridge preset (TransformerEngine scales per tensor or "
            f"per MXFP8 block); use {' or '.join(map(repr, BRIDGE_FP8_PRESETS))} with backend bridge"
        )
    if target.backend.name == "bridge" and section.emulate:
        return "float8.emulate: true is torchao's; TransformerEngine runs FP8 on the tensor cores only. Leave it out"
    if target.local:
        return capability_problem(section, "cpu", None, "the local CPU cluster")
    facts = target.instance
    # the compute capability GPUS records for the instance's GPU (the NeMo container check reads the same)
    capability = GPUS[facts.gpu_device].compute_capability if facts.gpu_device is not None else None
    where = f"{facts.name} ({facts.chip.name})" if facts.chip is not None else facts.name
    return capability_problem(section, "cuda" if capability else facts.accelerator, capability, where)
