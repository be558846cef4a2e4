"""FLOPs per token / per iteration and the device peak they are divided by.

Two model-FLOPs formulas are reported side by side:
- `mfu`: nanoGPT/PaLM style, 6 N + 12 l h s per token (N: parameters in matmuls, including the LM head; the
  attention term does not discount the causal mask). `hfu` adds the forward FLOPs that activation
  checkpointing recomputes.
- `megatron_util`: Narayanan et al. (seed 003), F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) per iteration. It
  assumes full recomputation, a 4h MLP and multi-head attention, so for a run without recompute it is an
  overestimate and for SwiGLU/GQA models an approximation.
"""

from __future__ import annotations

import time

import torch

from training.models.args import ModelArgs
from training.models.params import count_parameters

# Dense bf16 tensor-core peaks per device (never the 2:4 sparse figures).
GPU_PEAK_BF16_FLOPS: dict[str, float] = {
    "H200": 989e12,
    "H100": 989e12,
    "A100": 312e12,
    "A10G": 125e12,
    "L4": 121e12,
    "L40S": 362e12,
}


def model_flops_per_token(args: ModelArgs, seq_len: int) -> float:
    """6 N + 12 l h s: forward and backward of every matmul parameter, plus attention scores and values."""
    return 6.0 * count_parameters(args).flop_params + 12.0 * args.n_layers * args.dim * seq_len


def recompute_flops_per_token(args: ModelArgs, seq_len: int, recomputed_fraction: float) -> float:
    """Forward FLOPs of the recomputed blocks: 2 x block matmul parameters + 4 h s per block."""
    per_block = 2.0 * count_parameters(args).per_layer + 4.0 * args.dim * seq_len
    return recomputed_fraction * args.n_layers * per_block


def megatron_flops_per_iteration(args: ModelArgs, batch_size: int, seq_len: int) -> float:
    """Seed 003: 96 B s l h^2 (1 + s/(6h) + V/(16 l h)), counting full activation recomputation."""
    h, layers, vocab = args.dim, args.n_layers, args.vocab_size
    return 96.0 * batch_size * seq_len * layers * h * h * (1 + seq_len / (6 * h) + vocab / (16 * layers * h))


def gpu_peak_flops(device_name: str) -> tuple[float, str] | None:
    for marker, peak in GPU_PEAK_BF16_FLOPS.items():
        if marker in device_name:
            return peak, f"{marker} dense bf16 (table)"
    return None


def measure_cpu_matmul_flops(size: int = 768, repeats: int = 5) -> float:
    """Best of a few fp32 matmuls on this process's threads: the CPU "peak" MFU is measured against."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    torch.mm(a, b)  # warm-up
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - start)
    return 2.0 * size**3 / max(best, 1e-9)


def device_peak_flops(device: torch.device, override: float | None = None) -> tuple[float, str]:
    """(FLOP/s per device, where the number comes from)."""
    if override is not None:
        return override, "metrics.peak_flops (config)"
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        found = gpu_peak_flops(name)
        if found is None:
            raise ValueError(f"metrics.peak_flops: no peak known for GPU {name!r}; set it in the config")
        return found
    return measure_cpu_matmul_flops(), f"fp32 matmul measured on this CPU ({torch.get_num_threads()} threads)"
