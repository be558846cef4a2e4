"""GPT-NeoX block: LayerNorm, fused QKV with biases, partial rotary, GELU MLP, attention and MLP in parallel."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from training.models.args import ModelArgs
from training.models.attention import causal_attention
from training.models.init import WeightInit
from training.models.rope import apply_rotary


class NeoXAttention(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.n_heads, self.head_dim = args.n_heads, args.head_dim
        # Output features are laid out head-major, then (q, k, v) within a head, as in GPT-NeoX checkpoints.
        self.query_key_value = nn.Linear(args.dim, 3 * args.dim, bias=True)
        self.dense = nn.Linear(args.dim, args.dim, bias=True)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, mask: Tensor | None = None) -> Tensor:
        batch, seq, _ = x.shape
        qkv = self.query_key_value(x).view(batch, seq, self.n_heads, 3 * self.head_dim).transpose(1, 2)
        q, k, v = qkv.split(self.head_dim, dim=-1)
        out = causal_attention(apply_rotary(q, cos, sin), apply_rotary(k, cos, sin), v, mask)
        return self.dense(out.transpose(1, 2).reshape(batch, seq, -1))


class NeoXMLP(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.dense_h_to_4h = nn.Linear(dim, hidden, bias=True)
        self.dense_4h_to_h = nn.Linear(hidden, dim, bias=True)

    def forward(self, x: Tensor) -> Tensor:
        return self.dense_4h_to_h(F.gelu(self.dense_h_to_4h(x)))


class NeoXBlock(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.input_layernorm = nn.LayerNorm(args.dim, eps=args.norm_eps)
        self.post_attention_layernorm = nn.LayerNorm(args.dim, eps=args.norm_eps)
        self.attention = NeoXAttention(args)
        self.mlp = NeoXMLP(args.dim, args.ffn_dim)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, mask: Tensor | None = None) -> Tensor:
        # Parallel residual: both branches read the block input.
        return x + self.attention(self.input_layernorm(x), cos, sin, mask) + self.mlp(self.post_attention_layernorm(x))

    @torch.no_grad()
    def init_weights(self, init: WeightInit, std: float, n_layers: int) -> None:
        residual_std = std / math.sqrt(2 * n_layers)
        init.normal_(self.attention.query_key_value.weight, std)
        init.normal_(self.mlp.dense_h_to_4h.weight, std)
        init.normal_(self.attention.dense.weight, residual_std)
        init.normal_(self.mlp.dense_4h_to_h.weight, residual_std)
        for linear in (self.attention.query_key_value, self.attention.dense, self.mlp.dense_h_to_4h):
            nn.init.zeros_(linear.bias)
        nn.init.zeros_(self.mlp.dense_4h_to_h.bias)
        self.input_layernorm.reset_parameters()
        self.post_attention_layernorm.reset_parameters()
