"""Causal self-attention through torch's scaled_dot_product_attention (flash/efficient kernels where available)."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor


def causal_attention(query: Tensor, key: Tensor, value: Tensor) -> Tensor:
    """query [B, H, S, D], key/value [B, H_kv, S, D] with H a multiple of H_kv (grouped-query attention)."""
    grouped = key.shape[1] != query.shape[1]
    return F.scaled_dot_product_attention(query, key, value, is_causal=True, enable_gqa=grouped)
