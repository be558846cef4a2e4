"""FLOPs per token by the two formulas the background documents use. Pure arithmetic, no torch.

- nanoGPT / PaLM: 6 N + 12 l h s per token, N the parameters in matmuls (blocks and the output head, tied or
  not). The attention term counts the full s x s score matrix: no discount for the causal mask, the same
  convention as training.metrics.flops and seed 000's MFU column.
- Megatron (seed 003): F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) per iteration, which counts full activation
  recomputation; without it, 72 B s l h^2 (1 + s/(6h) + V/(12 l h)). It assumes a 4h MLP and multi-head
  attention, so for SwiGLU or grouped-query models it is an approximation.

Hardware FLOPs (HFU) add the forward of whatever activation checkpointing recomputes.
"""

from __future__ import annotations

import math
from typing import Literal

from training.models.args import ModelArgs
from training.models.params import count_parameters

Checkpointing = Literal["none", "selective", "every_n", "full"]
CHECKPOINTING_MODES: tuple[str, ...] = ("none", "selective", "every_n", "full")


def model_flops_per_token(args: ModelArgs, seq_len: int) -> float:
    """6 N + 12 l h s: forward and backward of every matmul parameter plus attention scores and values."""
    return 6.0 * count_parameters(args).flop_params + 12.0 * args.n_layers * args.dim * seq_len


def recomputed_block_fraction(mode: Checkpointing, n_layers: int, every_n: int = 2) -> float:
    """Share of transformer blocks whose forward runs twice. Per-op selective recomputes no matmul (the repo's
    policy saves matmul and attention outputs), so it adds no model-scale FLOPs."""
    if mode == "full":
        return 1.0
    if mode == "every_n":
        return math.ceil(n_layers / every_n) / n_layers
    return 0.0


def recompute_flops_per_token(args: ModelArgs, seq_len: int, block_fraction: float) -> float:
    """Forward FLOPs of the recomputed blocks: 2 x block matmul parameters + 4 h s of attention per block."""
    per_block = 2.0 * count_parameters(args).per_layer + 4.0 * args.dim * seq_len
    return block_fraction * args.n_layers * per_block


def hardware_flops_per_token(args: ModelArgs, seq_len: int, block_fraction: float) -> float:
    return model_flops_per_token(args, seq_len) + recompute_flops_per_token(args, seq_len, block_fraction)


def megatron_flops_per_iteration(args: ModelArgs, batch_size: int, seq_len: int, recompute: bool = True) -> float:
    """Seed 003's F for one iteration of `batch_size` sequences (with or without full recomputation)."""
    h, layers, vocab = float(args.dim), float(args.n_layers), float(args.vocab_size)
    if recompute:
        return 96.0 * batch_size * seq_len * layers * h * h * (1 + seq_len / (6 * h) + vocab / (16 * layers * h))
    return 72.0 * batch_size * seq_len * layers * h * h * (1 + seq_len / (6 * h) + vocab / (12 * layers * h))


def megatron_flops_per_token(args: ModelArgs, seq_len: int, recompute: bool = True) -> float:
    return megatron_flops_per_iteration(args, 1, seq_len, recompute) / seq_len
