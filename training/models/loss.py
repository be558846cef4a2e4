"""Cross-entropy over the vocabulary without a full logits tensor.

The usual `F.cross_entropy(logits.float(), labels)` keeps the [tokens, vocab] logits (bf16) and their fp32 copy
alive from the forward pass until backward: for the 1b config (128,256 entries, 16k tokens per micro-batch) that
is 12 GiB. Here the head's matmul, the upcast and the loss run chunk by chunk under activation checkpointing: the
forward keeps only each chunk's hidden states (already alive as the norm's output) and the summed loss, and the
backward recomputes one chunk's logits at a time. Peak memory for the loss is one chunk's logits.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.utils.checkpoint import checkpoint

IGNORE_INDEX = -100
CHUNK_TOKENS = 4096  # 4096 x 128,256 fp32 logits: 2 GiB at a time


def _chunk_loss(hidden: Tensor, weight: Tensor, labels: Tensor) -> Tensor:
    logits = F.linear(hidden, weight)
    return F.cross_entropy(logits.float(), labels, ignore_index=IGNORE_INDEX, reduction="sum")


def chunked_cross_entropy(hidden: Tensor, weight: Tensor, labels: Tensor, chunk_tokens: int = CHUNK_TOKENS) -> Tensor:
    """Sum over tokens of cross-entropy(hidden @ weight.T, labels) in fp32; hidden [..., dim], labels [...]."""
    hidden, labels = hidden.flatten(0, -2), labels.flatten()
    total = torch.zeros((), dtype=torch.float32, device=hidden.device)
    for start in range(0, hidden.shape[0], chunk_tokens):
        end = start + chunk_tokens
        total = total + checkpoint(_chunk_loss, hidden[start:end], weight, labels[start:end], use_reentrant=False)
    return total
