"""bf16 compute, one setting for both ways the model runs.

Sharded over several data-parallel ranks, FSDP2's MixedPrecisionPolicy casts the gathered parameters to bf16 and
reduces gradients in fp32 (training/parallel/fsdp.py). With one data-parallel rank the model is a plain module
(FSDP would only add its gather and reduce copies), so bf16 comes from autocast instead, as in torchtitan: fp32
parameters, gradients and optimizer state, matmuls in bf16.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

import torch


def uses_bf16(mode: str, device: torch.device) -> bool:
    """parallel.mixed_precision: "bf16" always, "auto" on GPUs only (CPUs run fp32), "fp32" never."""
    return mode == "bf16" or (mode == "auto" and device.type == "cuda")


def unsharded_autocast(mode: str, device: torch.device) -> AbstractContextManager[object]:
    """The context the forward pass of a plain (unsharded) model runs in: bf16 autocast, or nothing."""
    if uses_bf16(mode, device):
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return nullcontext()
