"""Causal self-attention through torch's scaled_dot_product_attention, with the kernel priority torchtitan sets:
cuDNN first (the fastest on H100), then flash, then memory-efficient, then math. On a CPU only math and the CPU
flash kernel exist; the priority list changes nothing there.

Packed SFT rows hold several samples; `document_mask` keeps attention inside each (block-diagonal causal). SDPA
takes it as a boolean attn_mask, which rules out the flash and cuDNN kernels and costs a [B, 1, S, S] mask per
micro-batch (docs/finetuning.md gives the measured cost)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.attention import SDPBackend, sdpa_kernel

SDPA_PRIORITY = [
    SDPBackend.CUDNN_ATTENTION,
    SDPBackend.FLASH_ATTENTION,
    SDPBackend.EFFICIENT_ATTENTION,
    SDPBackend.MATH,
]


def document_mask(document_ids: Tensor) -> Tensor:
    """[B, S] document ids -> [B, 1, S, S] boolean mask: a token sees the earlier tokens of its own document."""
    seq_len = document_ids.shape[1]
    same = document_ids.unsqueeze(2) == document_ids.unsqueeze(1)
    causal = torch.ones(seq_len, seq_len, dtype=torch.bool, device=document_ids.device).tril()
    return (same & causal).unsqueeze(1)


def causal_attention(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None) -> Tensor:
    """query [B, H, S, D], key/value [B, H_kv, S, D] with H a multiple of H_kv (grouped-query attention); `mask`
    ([B, 1, S, S] boolean, from document_mask) replaces the plain causal mask."""
    grouped = key.shape[1] != query.shape[1]
    with sdpa_kernel(SDPA_PRIORITY, set_priority=True):
        if mask is not None:
            return F.scaled_dot_product_attention(query, key, value, attn_mask=mask, enable_gqa=grouped)
        return F.scaled_dot_product_attention(query, key, value, is_causal=True, enable_gqa=grouped)
