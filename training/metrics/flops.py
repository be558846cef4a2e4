"""FLOPs per token / per iteration, and the device peak they are divided by: the one FLOPs module of the repo
(planner/flops.py re-exports these formulas). Torch is imported only to measure a peak.

Two model-FLOPs formulas are reported side by side:
- `mfu`: nanoGPT/PaLM style, 6 N + 12 l h s per token (N: parameters in matmuls, including the LM head, tied
  or not; the attention term counts the full s x s score matrix, no discount for the causal mask). `hfu` adds
  the forward FLOPs that activation checkpointing recomputes.
- `megatron_util`: Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM" (SC21, https://arxiv.org/abs/2104.04473), F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) per iteration with
  full recomputation, 72 B s l h^2 (1 + s/(6h) + V/(12 l h)) without. It assumes a 4h MLP and multi-head
  attention, so for SwiGLU/GQA models it is an approximation.

Peaks: dense bf16 per GPU from spec.platform.instances.GPUS, looked up by the exact name CUDA reports (H100 SXM, PCIe
and NVL differ by 30 %); an unknown GPU is an error unless metrics.peak_flops gives a number or "measure".
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from spec.platform.instances import GPUS
from training.models.args import ModelArgs
from training.models.params import count_parameters

if TYPE_CHECKING:
    import torch

Checkpointing = Literal["none", "selective", "every_n", "full"]
CHECKPOINTING_MODES: tuple[str, ...] = ("none", "selective", "every_n", "full")
MEASURE = "measure"


@functools.lru_cache(maxsize=4096)  # the planner's fit asks for the same shapes millions of times
def model_flops_per_token(args: ModelArgs, seq_len: int) -> float:
    """6 N + 12 l h s: forward and backward of every matmul parameter, plus attention scores and values."""
    return 6.0 * count_parameters(args).flop_params + 12.0 * args.n_layers * args.attention_dim * seq_len


def recomputed_block_fraction(mode: str, n_layers: int, every_n: int = 2) -> float:
    """Share of block forward FLOPs run twice. Per-op selective recomputes every other matmul of each block and
    saves the attention kernels: counted as half the block (the attention term then is a slight overcount)."""
    if mode == "full":
        return 1.0
    if mode == "selective":
        return 0.5
    if mode == "every_n":
        return math.ceil(n_layers / every_n) / n_layers
    return 0.0


def recompute_flops_per_token(args: ModelArgs, seq_len: int, block_fraction: float) -> float:
    """Forward FLOPs of the recomputed blocks: 2 x block matmul parameters + 4 h s of attention per block."""
    per_block = 2.0 * count_parameters(args).active_per_layer + 4.0 * args.attention_dim * seq_len
    return block_fraction * args.n_layers * per_block


def hardware_flops_per_token(args: ModelArgs, seq_len: int, block_fraction: float) -> float:
    return model_flops_per_token(args, seq_len) + recompute_flops_per_token(args, seq_len, block_fraction)


def megatron_flops_per_iteration(args: ModelArgs, batch_size: int, seq_len: int, recompute: bool = True) -> float:
    """The Megatron-LM paper's F for one iteration of `batch_size` sequences (with or without full recomputation)."""
    h, layers, vocab = float(args.dim), float(args.n_layers), float(args.vocab_size)
    if recompute:
        return 96.0 * batch_size * seq_len * layers * h * h * (1 + seq_len / (6 * h) + vocab / (16 * layers * h))
    return 72.0 * batch_size * seq_len * layers * h * h * (1 + seq_len / (6 * h) + vocab / (12 * layers * h))


def megatron_flops_per_token(args: ModelArgs, seq_len: int, recompute: bool = True) -> float:
    return megatron_flops_per_iteration(args, 1, seq_len, recompute) / seq_len


def gpu_peak_flops(device_name: str) -> tuple[float, str] | None:
    """(dense bf16 FLOP/s, source) for a GPU by its exact CUDA name, or None when the table lacks it."""
    facts = GPUS.get(device_name)
    if facts is None:
        return None
    return facts.peak_bf16_flops, f"{facts.label} dense bf16 (spec/platform/instances.py)"


def measure_matmul_flops(device: torch.device, size: int = 768, repeats: int = 5) -> float:
    """Best of a few square matmuls: bf16 on a GPU, timed with CUDA events so only the kernels count; fp32 on a CPU,
    one thread timed in its own CPU time, times this process's threads. Ranks starting together share the cores
    while this runs: in wall time the peak shrank with them and MFU read over 100 % once they went quiet; CPU time
    leaves out what the other processes take."""
    import torch

    if device.type != "cuda":
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return threads * _best_flops(size, repeats, lambda: _cpu_seconds_of_one_matmul(size))
        finally:
            torch.set_num_threads(threads)
    a = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    b = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    torch.mm(a, b)  # warm-up

    def timed() -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.mm(a, b)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3

    return _best_flops(size, repeats, timed)


def _cpu_seconds_of_one_matmul(size: int) -> float:
    import torch

    a = torch.randn(size, size)
    b = torch.randn(size, size)
    torch.mm(a, b)  # warm-up
    began = time.thread_time()
    torch.mm(a, b)
    return time.thread_time() - began


def _best_flops(size: int, repeats: int, seconds_of_one: Callable[[], float]) -> float:
    best = min(seconds_of_one() for _ in range(repeats))
    return 2.0 * size**3 / max(best, 1e-9)


def device_peak_flops(device: torch.device, override: float | str | None = None) -> tuple[float, str]:
    """(FLOP/s per device, where the number comes from). override: metrics.peak_flops (a number or "measure")."""
    import torch

    if isinstance(override, int | float):
        return float(override), "metrics.peak_flops (config)"
    if device.type == "cuda" and override != MEASURE:
        name = torch.cuda.get_device_name(device)
        found = gpu_peak_flops(name)
        if found is None:
            raise ValueError(
                f"metrics.peak_flops: no dense bf16 peak is known for GPU {name!r} (known: {', '.join(GPUS)}); "
                f"set metrics.peak_flops to its dense bf16 FLOP/s, or to 'measure' for a bf16 matmul measurement"
            )
        return found
    if device.type == "cuda":
        return measure_matmul_flops(device, size=8192, repeats=10), f"bf16 matmul measured on {device}"
    threads = torch.get_num_threads()
    return measure_matmul_flops(device), f"fp32 matmul measured on this CPU (one thread's CPU time x {threads} threads)"
