"""Activation checkpointing per transformer block: none, full, every n-th block (the PyTorch FSDP blog), or per-op
selective. PyTorch FSDP blog: "Maximizing training throughput using PyTorch FSDP" (IBM and Meta, 2024,
https://pytorch.org/blog/maximizing-training/).

Per-op selective is torchtitan's policy: it keeps the outputs of attention kernels and of every other matmul
(the 1st, 3rd, ... of each block's forward), and recomputes the remaining matmuls and the cheap elementwise ops and
norms in backward. About half of full checkpointing's saving for a quarter of its recompute FLOPs.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

from training.config import ActivationCheckpointSection
from training.metrics.flops import recomputed_block_fraction

_aten = torch.ops.aten
_SAVED_OPS = {
    _aten.mm.default,
    _aten.addmm.default,
    _aten.bmm.default,
    _aten._scaled_dot_product_flash_attention.default,
    _aten._scaled_dot_product_efficient_attention.default,
    _aten._scaled_dot_product_cudnn_attention.default,
    _aten._scaled_dot_product_flash_attention_for_cpu.default,
    torch.ops._c10d_functional.reduce_scatter_tensor.default,
}


def selective_policy(matmuls: Counter[str], ctx: Any, op: Any) -> CheckpointPolicy:
    """Save attention and every other matmul; `matmuls` counts the block call's mm ops. (Torch consults the policy
    in the forward only; the recompute replays its decisions.)"""
    if op == _aten.mm.default:
        matmuls["mm"] += 1
        if matmuls["mm"] % 2 == 0:
            return CheckpointPolicy.PREFER_RECOMPUTE
    return CheckpointPolicy.MUST_SAVE if op in _SAVED_OPS else CheckpointPolicy.PREFER_RECOMPUTE


def _selective_context() -> Any:
    matmuls: Counter[str] = Counter()  # one per block call
    return create_selective_checkpoint_contexts(lambda ctx, op, *args, **kwargs: selective_policy(matmuls, ctx, op))


def checkpointed_blocks(section: ActivationCheckpointSection, n_layers: int) -> list[int]:
    """Indices of blocks wrapped in full checkpointing (selective wraps every block but recomputes no matmul)."""
    if section.mode == "full":
        return list(range(n_layers))
    if section.mode == "every_n":
        return list(range(0, n_layers, section.every_n))
    return []


def recomputed_fraction(section: ActivationCheckpointSection, n_layers: int) -> float:
    """Share of block forward FLOPs run twice; HFU counts them, MFU does not."""
    return recomputed_block_fraction(section.mode, n_layers, section.every_n)


def apply_activation_checkpointing(layers: nn.ModuleList, section: ActivationCheckpointSection) -> None:
    if section.mode == "none":
        return
    if section.mode == "selective":
        for index, block in enumerate(layers):
            layers[index] = checkpoint_wrapper(block, context_fn=_selective_context, preserve_rng_state=False)
        return
    for index in checkpointed_blocks(section, len(layers)):
        layers[index] = checkpoint_wrapper(layers[index], preserve_rng_state=False)


__all__ = ["apply_activation_checkpointing", "checkpointed_blocks", "recomputed_fraction"]
