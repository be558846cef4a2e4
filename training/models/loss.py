"""Cross-entropy over the vocabulary fused with the LM head's matmul, without a full logits tensor.

The usual `F.cross_entropy(logits.float(), labels)` keeps the [tokens, vocab] logits (bf16) and their fp32 copy
alive from the forward pass until backward: for the 1b config (128,256 entries, 16k tokens per micro-batch) that
is 12 GiB, 20 GiB with the fp32 gradient. Here the forward pass runs chunk by chunk: one chunk's logits, their fp32 softmax, the chunk's summed
loss, and at once the chunk's gradients with respect to the hidden states and the head weight (softmax minus the
one-hot label, times the weight or the hidden states). What is kept for backward is those two gradients - the
size of the hidden states and of the weight - and backward only scales them by the incoming gradient. Peak memory
for the loss is one chunk's logits, 10 bytes per entry (planner/memory.py's `loss_bytes` counts it, checked
against the CPU allocator by tests/planner/test_loss_memory.py); the head's matmul runs once per step, not again in backward as it would
under activation checkpointing (the approach of Liger-Kernel's and torchtune's fused linear cross-entropy).

The matmuls run in the dtype autocast or the parameters give them (bf16 logits and bf16 gradient matmuls, as the
unfused loss's backward would run them); softmax, loss and the weight gradient's sum over chunks are fp32.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable

IGNORE_INDEX = -100
CHUNK_TOKENS = 4096  # 4096 x 128,256 fp32 logits: 2 GiB at a time


def _chunk_logits(hidden: Tensor, weight: Tensor, labels: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor, torch.dtype]:
    """fp32 log-probabilities of one chunk, its summed loss, the ignore mask (fp32 1/0), the labels made safe to
    gather, and the dtype the head's matmul ran in."""
    logits = F.linear(hidden, weight)
    logits32 = logits.float()
    valid = (labels != IGNORE_INDEX).to(torch.float32)
    safe_labels = labels.clamp(min=0).unsqueeze(1)
    log_norm = torch.logsumexp(logits32, dim=-1)
    loss = ((log_norm - logits32.gather(1, safe_labels).squeeze(1)) * valid).sum()
    return logits32.sub_(log_norm.unsqueeze(1)), loss, valid, safe_labels, logits.dtype


class _FusedLinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, hidden: Tensor, weight: Tensor, labels: Tensor, chunk_tokens: int) -> Tensor:
        grad_hidden = torch.empty_like(hidden) if ctx.needs_input_grad[0] else None
        grad_weight: Tensor | None = None
        total = torch.zeros((), dtype=torch.float32, device=hidden.device)
        for start in range(0, hidden.shape[0], chunk_tokens):
            chunk = hidden[start : start + chunk_tokens]
            log_probs, loss, valid, safe_labels, matmul_dtype = _chunk_logits(
                chunk, weight, labels[start : start + chunk_tokens]
            )
            total += loss
            # d loss / d logits = softmax - one_hot(label), zero on ignored tokens; in place over the log-probs.
            grad_logits = log_probs.exp_()
            grad_logits.scatter_add_(1, safe_labels, -valid.unsqueeze(1))
            grad_logits.mul_(valid.unsqueeze(1))
            grad_logits = grad_logits.to(matmul_dtype)  # as the unfused backward's matmuls run
            if grad_hidden is not None:
                grad_hidden[start : start + chunk_tokens] = grad_logits @ weight.to(grad_logits.dtype)
            if ctx.needs_input_grad[1]:
                part = grad_logits.T @ chunk.to(grad_logits.dtype)
                grad_weight = part.float() if grad_weight is None else grad_weight.add_(part)
                del part
            # Freed now: the next chunk's logits must not be formed beside this chunk's (6 bytes per entry more).
            del log_probs, grad_logits
        if grad_weight is not None:
            grad_weight = grad_weight.to(weight.dtype)
        ctx.save_for_backward(grad_hidden, grad_weight)
        return total

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_output: Tensor) -> tuple[Tensor | None, Tensor | None, None, None]:
        grad_hidden, grad_weight = ctx.saved_tensors
        # Scaled without looking at grad_output's value on the host (no device sync).
        return (
            None if grad_hidden is None else grad_hidden * grad_output.to(grad_hidden.dtype),
            None if grad_weight is None else grad_weight * grad_output.to(grad_weight.dtype),
            None,
            None,
        )


def chunked_cross_entropy(hidden: Tensor, weight: Tensor, labels: Tensor, chunk_tokens: int = CHUNK_TOKENS) -> Tensor:
    """Sum over tokens of cross-entropy(hidden @ weight.T, labels) in fp32, tokens labelled IGNORE_INDEX left out;
    hidden [..., dim], labels [...]. Gradients are computed in the forward pass when autograd will need them."""
    hidden, labels = hidden.flatten(0, -2), labels.flatten()
    if torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad):
        return _FusedLinearCrossEntropy.apply(hidden, weight, labels, chunk_tokens)
    total = torch.zeros((), dtype=torch.float32, device=hidden.device)
    for start in range(0, hidden.shape[0], chunk_tokens):
        end = start + chunk_tokens
        total += _chunk_logits(hidden[start:end], weight, labels[start:end])[1]
    return total
