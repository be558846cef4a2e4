"""FSDP2: fully_shard each transformer block, then the root (embeddings, final norm, head)."""

from __future__ import annotations

import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

from training.parallel.precision import uses_bf16


def mixed_precision_policy(mode: str, device: torch.device) -> MixedPrecisionPolicy:
    """bf16 compute with fp32 gradient reduction on GPU ("auto"); fp32 throughout on CPU."""
    if uses_bf16(mode, device):
        return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    return MixedPrecisionPolicy()


def compute_dtype(policy: MixedPrecisionPolicy) -> torch.dtype:
    return policy.param_dtype or torch.float32


def apply_fsdp(
    model: nn.Module, layers: nn.ModuleList, mesh: DeviceMesh, policy: MixedPrecisionPolicy, reshard: bool
) -> None:
    last = len(layers) - 1
    for index, block in enumerate(layers):
        # Backward starts with the last block, so resharding it after forward would only gather it again.
        fully_shard(block, mesh=mesh, mp_policy=policy, reshard_after_forward=reshard and index < last)
    fully_shard(model, mesh=mesh, mp_policy=policy, reshard_after_forward=reshard)
