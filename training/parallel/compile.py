"""torch.compile per transformer block: blocks are identical, so one compiled graph serves them all."""

from __future__ import annotations

from torch import nn


def apply_compile(layers: nn.ModuleList, backend: str) -> None:
    for block in layers:
        # In place (Module.compile), so parameter names and checkpoint keys stay those of the eager model.
        block.compile(backend=backend, fullgraph=True)
