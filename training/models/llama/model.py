"""Llama block: pre-norm RMSNorm, rotary attention with optional grouped-query heads, SwiGLU MLP, no biases (except
Qwen2's optional q/k/v ones; Qwen3's optional per-head q/k norms)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from training.models.args import ModelArgs
from training.models.attention import causal_attention
from training.models.init import WeightInit
from training.models.rope import apply_rotary


class LlamaAttention(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = args.n_heads, args.kv_heads, args.head_dim
        self.wq = nn.Linear(args.dim, args.n_heads * args.head_dim, bias=args.qkv_bias)
        self.wk = nn.Linear(args.dim, args.kv_heads * args.head_dim, bias=args.qkv_bias)
        self.wv = nn.Linear(args.dim, args.kv_heads * args.head_dim, bias=args.qkv_bias)
        self.wo = nn.Linear(args.n_heads * args.head_dim, args.dim, bias=False)
        # Qwen3's per-head norms of q and k (before rotary); absent in Llama.
        self.q_norm = nn.RMSNorm(args.head_dim, eps=args.norm_eps) if args.qk_norm else None
        self.k_norm = nn.RMSNorm(args.head_dim, eps=args.norm_eps) if args.qk_norm else None

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, mask: Tensor | None = None) -> Tensor:
        batch, seq, _ = x.shape
        q = self.wq(x).view(batch, seq, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(batch, seq, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(batch, seq, self.n_kv_heads, self.head_dim).transpose(1, 2)
        if self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        out = causal_attention(apply_rotary(q, cos, sin), apply_rotary(k, cos, sin), v, mask)
        return self.wo(out.transpose(1, 2).reshape(batch, seq, -1))


class SwiGLU(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)  # gate
        self.w3 = nn.Linear(dim, hidden, bias=False)  # up
        self.w2 = nn.Linear(hidden, dim, bias=False)  # down

    def forward(self, x: Tensor) -> Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class LlamaBlock(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.attention_norm = nn.RMSNorm(args.dim, eps=args.norm_eps)
        self.attention = LlamaAttention(args)
        self.ffn_norm = nn.RMSNorm(args.dim, eps=args.norm_eps)
        self.feed_forward = SwiGLU(args.dim, args.ffn_dim)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, mask: Tensor | None = None) -> Tensor:
        h = x + self.attention(self.attention_norm(x), cos, sin, mask)
        return h + self.feed_forward(self.ffn_norm(h))

    @torch.no_grad()
    def init_weights(self, init: WeightInit, std: float, n_layers: int) -> None:
        # Projections that write into the residual stream shrink with depth (GPT-2 / Megatron scaled init).
        residual_std = std / math.sqrt(2 * n_layers)
        for linear in (self.attention.wq, self.attention.wk, self.attention.wv, self.feed_forward.w1):
            init.normal_(linear.weight, std)
            if linear.bias is not None:  # Qwen2's q/k/v biases start at zero
                linear.bias.zero_()
        init.normal_(self.feed_forward.w3.weight, std)
        for linear in (self.attention.wo, self.feed_forward.w2):
            init.normal_(linear.weight, residual_std)
        self.attention_norm.reset_parameters()
        self.ffn_norm.reset_parameters()
        for norm in (self.attention.q_norm, self.attention.k_norm):
            if norm is not None:
                norm.reset_parameters()
