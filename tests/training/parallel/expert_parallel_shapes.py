"""The MoE layer and the per-rank inputs that the expert-parallel oracle shares between its torchrun worker and
its single-process reference."""

from __future__ import annotations

import torch
from torch import Tensor

from training.models.moe import MoE
from training.models.registry import get_model_args

# Shared experts and the aux-free bias included; 4 experts over EP 2 = 2 per rank.
MOE_ARGS = get_model_args("qwen3-moe-tiny").replace(n_shared_experts=1, router_bias_update_rate=0.001)
TOKENS = (2, 12)  # [batch, sequence] per rank


@torch.no_grad()
def seeded_moe(lopsided: bool = False) -> MoE:
    """The same full weights on every rank (fp32, CPU). `lopsided`: the router bias sends every token to experts 0
    and 1, so under EP 2 rank 1's experts receive no rows and rank 0 sends it none."""
    moe = MoE(MOE_ARGS)
    generator = torch.Generator().manual_seed(11)
    for _, param in sorted(moe.named_parameters()):
        param.copy_(torch.randn(param.shape, generator=generator) * 0.2)
    if lopsided:
        assert moe.router.expert_bias is not None
        moe.router.expert_bias.copy_(torch.tensor([100.0, 100.0, 0.0, 0.0]))
    return moe


def layer_inputs(rank: int) -> tuple[Tensor, Tensor]:
    """Rank `rank`'s hidden states and the fixed probe its output is dotted with to make a scalar loss."""
    generator = torch.Generator().manual_seed(100 + rank)
    x = torch.randn(*TOKENS, MOE_ARGS.dim, generator=generator)
    probe = torch.randn(*TOKENS, MOE_ARGS.dim, generator=generator)
    return x, probe
