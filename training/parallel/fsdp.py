"""FSDP2 as torchtitan groups it: the token embedding, each transformer block, and the final norm with the output
head each gather their parameters as one unit; the root holds what is left. With tied embeddings the table is used
by the first and the last computation of the step, so it stays in the root group with the norm."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard

from training.parallel.precision import uses_bf16

Batch = TypeVar("Batch")


def mixed_precision_policy(mode: str, device: torch.device) -> MixedPrecisionPolicy:
    """bf16 compute with fp32 gradient reduction on GPU ("auto"); fp32 throughout on CPU. Forward inputs are not
    cast: the blocks' rotary cos/sin tables stay fp32 (the hidden states arrive in bf16 from the embedding)."""
    if uses_bf16(mode, device):
        return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32, cast_forward_inputs=False)
    return MixedPrecisionPolicy(cast_forward_inputs=False)


def apply_fsdp(
    model: nn.Module, layers: nn.ModuleList, mesh: DeviceMesh, policy: MixedPrecisionPolicy, reshard: bool
) -> None:
    tied = getattr(model, "output", None) is None
    if not tied:
        fully_shard(model.get_submodule("tok_embeddings"), mesh=mesh, mp_policy=policy, reshard_after_forward=reshard)
    last = len(layers) - 1
    for index, block in enumerate(layers):
        # Backward starts with the last block, so resharding it after forward would only gather it again.
        fully_shard(block, mesh=mesh, mp_policy=policy, reshard_after_forward=reshard and index < last)
    if not tied:
        # The head runs last in forward and first in backward: kept gathered in between.
        fully_shard(
            [model.get_submodule("norm"), model.get_submodule("output")],
            mesh=mesh,
            mp_policy=policy,
            reshard_after_forward=False,
        )
    fully_shard(model, mesh=mesh, mp_policy=policy, reshard_after_forward=reshard)


def replicas_reduce_on_last(model: nn.Module, micro_batches: Sequence[Batch]) -> Iterator[Batch]:
    """The micro-batches of one optimizer step, in order. Under HSDP, the backward of every micro-batch but the
    last only reduce-scatters within its shard group and adds to the shard's gradient sum; the last one's
    all-reduces that sum across replicas once, as torchtitan does (and as the planner's step time counts it)."""
    last = len(micro_batches) - 1
    for index, batch in enumerate(micro_batches):
        if isinstance(model, FSDPModule):
            model.set_requires_all_reduce(index == last)
        yield batch
