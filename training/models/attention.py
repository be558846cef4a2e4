"""Causal self-attention through torch's scaled_dot_product_attention, with the kernel priority torchtitan sets:
cuDNN first (the fastest on H100), then flash, then memory-efficient, then math. On a CPU only math and the CPU
flash kernel exist; the priority list changes nothing there."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor
from torch.nn.attention import SDPBackend, sdpa_kernel

SDPA_PRIORITY = [
    SDPBackend.CUDNN_ATTENTION,
    SDPBackend.FLASH_ATTENTION,
    SDPBackend.EFFICIENT_ATTENTION,
    SDPBackend.MATH,
]


def causal_attention(query: Tensor, key: Tensor, value: Tensor) -> Tensor:
    """query [B, H, S, D], key/value [B, H_kv, S, D] with H a multiple of H_kv (grouped-query attention)."""
    grouped = key.shape[1] != query.shape[1]
    with sdpa_kernel(SDPA_PRIORITY, set_priority=True):
        return F.scaled_dot_product_attention(query, key, value, is_causal=True, enable_gqa=grouped)
