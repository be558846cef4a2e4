"""Apply, in order, activation checkpointing, compile and FSDP2 to a model built on the meta device."""

from __future__ import annotations

import re

from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import MixedPrecisionPolicy

from training.config import ParallelSection
from training.parallel.activation_checkpoint import apply_activation_checkpointing
from training.parallel.compile import apply_compile
from training.parallel.fsdp import apply_fsdp

_WRAPPER_PARTS = re.compile(r"(_checkpoint_wrapped_module|_orig_mod)\.")


def parallelize(
    model: nn.Module, section: ParallelSection, mesh: DeviceMesh | None, policy: MixedPrecisionPolicy
) -> None:
    """`mesh` None: one data-parallel rank, where the model stays a plain module (FSDP would only add copies;
    bf16 then comes from autocast, training/parallel/precision.py)."""
    layers = model.layers
    if not isinstance(layers, nn.ModuleList):
        raise TypeError(f"model.layers: {type(layers).__name__} is not an nn.ModuleList")
    apply_activation_checkpointing(layers, section.activation_checkpoint)
    if section.compile:
        apply_compile(layers, section.compile_backend)
    if mesh is not None:
        apply_fsdp(model, layers, mesh, policy, section.reshard_after_forward)


def plain_name(name: str) -> str:
    """Parameter name without the wrapper parts that checkpointing/compile insert (as in state dicts)."""
    return _WRAPPER_PARTS.sub("", name)
