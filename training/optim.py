"""AdamW with the defaults of the PyTorch FSDP blog and the learning-rate schedule: linear warmup, then cosine down
to min_lr_ratio x peak. The schedule is a pure function of the step, so resuming needs no scheduler state.

PyTorch FSDP blog: "Maximizing training throughput using PyTorch FSDP" (IBM and Meta, 2024,
https://pytorch.org/blog/maximizing-training/).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from training.config import OptimSection


def learning_rate(section: OptimSection, step: int, max_steps: int) -> float:
    """LR for optimizer step `step` (1-based: the first update uses step 1)."""
    peak, floor = section.lr, section.lr * section.min_lr_ratio
    if section.warmup_steps and step <= section.warmup_steps:
        return peak * step / section.warmup_steps
    decay_end = section.decay_steps or max_steps
    if step >= decay_end:
        return floor
    progress = (step - section.warmup_steps) / max(1, decay_end - section.warmup_steps)
    return floor + 0.5 * (peak - floor) * (1.0 + math.cos(math.pi * progress))


def build_optimizer(model: nn.Module, section: OptimSection, device: torch.device) -> torch.optim.AdamW:
    """Weight decay on matrices only: norms and biases (1-D) are not decayed. Fused ("auto") on GPU and CPU alike:
    the fused kernel skips a step on the device when the loss guard says so (its found_inf), with no host sync."""
    decay = [p for p in model.parameters() if p.requires_grad and p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.ndim < 2]
    fused = True if section.fused == "auto" else bool(section.fused)
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": section.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=section.lr,
        betas=(section.beta1, section.beta2),
        eps=section.eps,
        fused=fused,
    )


def set_learning_rate(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr
