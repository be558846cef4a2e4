"""Weight initialisation that does not depend on how the model is sharded.

Each parameter's full tensor is drawn from its own generator, seeded from (run seed, parameter index), and every
rank keeps only the part it holds. A model sharded over N ranks (FSDP2 or HSDP DTensors) therefore equals the
unsharded model built from the same seed, on CPU meshes too, where DTensor's own RNG is not supported and would
hand every shard the same numbers. The cost is one full parameter at a time on each rank while it is drawn (2 GB
for an 8B model's fp32 embedding table), freed before the next one.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.distributed.tensor import DTensor
from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

_SEED_STRIDE = 1_000_003  # keeps the per-parameter seeds of neighbouring run seeds apart


def _local_part(param: Tensor, full: Tensor) -> Tensor:
    """The slice of `full` that this rank holds of `param` (all of it for a plain tensor)."""
    if not isinstance(param, DTensor):
        return full
    shape, offset = compute_local_shape_and_global_offset(param.shape, param.device_mesh, param.placements)
    for dim, (start, length) in enumerate(zip(offset, shape, strict=True)):
        full = full.narrow(dim, start, length)
    return full


class WeightInit:
    """normal_(param, std) draws `param` as one unsharded tensor from its own seeded generator."""

    def __init__(self, model: nn.Module, seed: int) -> None:
        self.seed = seed
        # Registration order is the same for a plain, wrapped (AC, compile) or sharded model.
        self._index = {id(param): index for index, param in enumerate(model.parameters())}

    def generator(self, param: Tensor) -> torch.Generator:
        seed = (self.seed * _SEED_STRIDE + self._index[id(param)]) % 2**63
        return torch.Generator(device=param.device).manual_seed(seed)

    @torch.no_grad()
    def normal_(self, param: Tensor, std: float) -> None:
        full = torch.empty(param.shape, dtype=param.dtype, device=param.device)
        full.normal_(mean=0.0, std=std, generator=self.generator(param))
        self._keep_local(param, full)

    @torch.no_grad()
    def uniform_(self, param: Tensor, bound: float) -> None:
        """U(-bound, bound), drawn whole like normal_."""
        full = torch.empty(param.shape, dtype=param.dtype, device=param.device)
        full.uniform_(-bound, bound, generator=self.generator(param))
        self._keep_local(param, full)

    @staticmethod
    def _keep_local(param: Tensor, full: Tensor) -> None:
        local = param.to_local() if isinstance(param, DTensor) else param
        local.copy_(_local_part(param, full))
