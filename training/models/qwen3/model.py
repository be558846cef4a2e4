"""Qwen3 block: Llama's pre-norm attention with RMSNorm over each head's q and k, then a dense SwiGLU (Qwen3) or a
mixture of experts (Qwen3-MoE, training/models/moe.py). The mixtral family's block is this one without q/k norms."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from training.models.args import ModelArgs
from training.models.init import WeightInit
from training.models.llama.model import LlamaAttention, SwiGLU
from training.models.moe import MoE, residual_std


class Qwen3Block(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.attention_norm = nn.RMSNorm(args.dim, eps=args.norm_eps)
        self.attention = LlamaAttention(args)
        self.ffn_norm = nn.RMSNorm(args.dim, eps=args.norm_eps)
        self.feed_forward: SwiGLU | MoE = MoE(args) if args.is_moe else SwiGLU(args.dim, args.ffn_dim)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, mask: Tensor | None = None) -> Tensor:
        h = x + self.attention(self.attention_norm(x), cos, sin, mask)
        return h + self.feed_forward(self.ffn_norm(h))

    @torch.no_grad()
    def init_weights(self, init: WeightInit, std: float, n_layers: int) -> None:
        out_std = residual_std(std, n_layers)  # projections into the residual stream shrink with depth
        for linear in (self.attention.wq, self.attention.wk, self.attention.wv):
            init.normal_(linear.weight, std)
        init.normal_(self.attention.wo.weight, out_std)
        if isinstance(self.feed_forward, MoE):
            self.feed_forward.init_weights(init, std, out_std)
        else:
            init.normal_(self.feed_forward.w1.weight, std)
            init.normal_(self.feed_forward.w3.weight, std)
            init.normal_(self.feed_forward.w2.weight, out_std)
        for norm in (self.attention_norm, self.ffn_norm, self.attention.q_norm, self.attention.k_norm):
            if norm is not None:
                norm.reset_parameters()
