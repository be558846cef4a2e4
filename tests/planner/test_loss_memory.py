"""The planner's loss term against what the fused linear cross-entropy (training/models/loss.py) really holds: the
peak of the CPU allocator's live bytes during the loss's forward and backward, read from torch's profiler."""

from __future__ import annotations

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from planner.memory import LOSS_CHUNK_TOKENS, loss_bytes
from training.models import loss as fused_loss


def peak_loss_bytes(tokens: int, dim: int, vocab: int, chunk: int) -> int:
    """Peak bytes allocated (beyond the inputs) by one forward and backward of the fused loss in bf16."""
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(tokens, dim, generator=generator).bfloat16().requires_grad_()
    weight = torch.randn(vocab, dim, generator=generator).bfloat16().requires_grad_()
    labels = torch.randint(0, vocab, (tokens,), generator=generator)

    def step() -> None:
        fused_loss.chunked_cross_entropy(hidden, weight, labels, chunk_tokens=chunk).backward()
        hidden.grad = weight.grad = None

    step()  # warm-up: one-time allocations stay out of the count
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as profiler:
        step()
    events = sorted(
        (event for event in profiler.profiler.kineto_results.events() if event.name() == "[memory]"),
        key=lambda event: event.start_ns(),
    )
    live = peak = 0
    for event in events:
        live += event.nbytes()
        peak = max(peak, live)
    return peak


@pytest.mark.parametrize(
    ("tokens", "dim", "vocab", "chunk"), [(512, 32, 2048, 128), (768, 64, 4096, 256)], ids=["4-chunks", "3-chunks"]
)
def test_the_planner_counts_the_peak_the_fused_loss_reaches(tokens: int, dim: int, vocab: int, chunk: int) -> None:
    measured = peak_loss_bytes(tokens, dim, vocab, chunk)
    planned = loss_bytes(tokens, vocab, dim, fused=True, chunk_tokens=chunk)
    assert planned == pytest.approx(measured, rel=0.03), f"planned {planned:,} bytes, measured {measured:,}"


def test_the_planner_chunk_is_the_loss_chunk() -> None:
    assert LOSS_CHUNK_TOKENS == fused_loss.CHUNK_TOKENS


def test_an_unfused_loss_keeps_the_whole_logits() -> None:
    # bf16 logits, their fp32 copy and its gradient for every token: the published frameworks' loss.
    assert loss_bytes(16384, 128256, 2048, fused=False) == 16384 * 128256 * 10
