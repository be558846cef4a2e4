"""The planner's FLOPs counts are the trainer's: training/metrics/flops.py is the one FLOPs module (formulas,
conventions, peaks); this module only gives the planner its names for them."""

from __future__ import annotations

from training.metrics.flops import (
    CHECKPOINTING_MODES,
    Checkpointing,
    hardware_flops_per_token,
    megatron_flops_per_iteration,
    megatron_flops_per_token,
    model_flops_per_token,
    recompute_flops_per_token,
    recomputed_block_fraction,
)

__all__ = [
    "CHECKPOINTING_MODES",
    "Checkpointing",
    "hardware_flops_per_token",
    "megatron_flops_per_iteration",
    "megatron_flops_per_token",
    "model_flops_per_token",
    "recompute_flops_per_token",
    "recomputed_block_fraction",
]
