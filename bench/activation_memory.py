"""Activation bytes one transformer block keeps for backward, per token, measured with autograd's saved-tensor hooks.

`python -m bench.activation_memory [--model 1b] [--instance p5.48xlarge] [--nodes 1] [--seq 4096] [--batch 4]`
prints the measured figure beside the planner's (planner/memory.py) and the planner's verdict on whether
the job fits, with the measured figure in place of the planner's.

What is measured is what a GPU run of the config keeps, reproduced on a CPU:
- FSDP2's bf16 policy: block parameters and hidden states in bf16 (the 1b config on one 8-GPU node).
- No activation checkpointing (the config's mode "none"): every tensor autograd saves counts.
- Attention: SDPA's fused kernels (cuDNN and flash on the GPU, the flash kernel on a CPU) save q, k, v, the output
  and a fp32 log-sum-exp per head and token, never the scores; the CPU kernel saves the same set.
- RMSNorm: on CUDA `F.rms_norm` runs torch's fused kernel, which saves its input and a fp32 reciprocal RMS per
  token; on a CPU it decomposes into fp32 ops that save more. The measurement runs the block's norms through a
  stand-in that saves what the CUDA kernel saves (its derivative's inputs: input, rstd, weight).
Every saved tensor is counted once (by storage; views share it), parameters are left out, and the figure is the
difference between batch 2 and batch 1 at the same sequence length divided by the sequence length, so what does
not grow with tokens (rotary tables, cast weights) drops out.
"""

from __future__ import annotations

import argparse
from typing import Any

import torch
from torch import Tensor, nn

from planner.memory import GIB, block_activation_bytes_per_token, memory_per_device
from spec.cli import user_errors
from training.models.args import ModelArgs
from training.models.registry import get_model_args
from training.models.rope import model_inverse_frequencies, rotary_cos_sin
from training.models.transformer import block_class

MEASURE_SEQ = 256


class _CudaRMSNorm(torch.autograd.Function):
    """RMSNorm saving what CUDA's fused kernel saves for backward: its input and the fp32 reciprocal RMS."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor, eps: float) -> Tensor:
        rstd = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)
        ctx.save_for_backward(x, rstd, weight)
        return (x.float() * rstd).to(x.dtype) * weight

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, Tensor, None]:
        raise NotImplementedError("measurement only")


class _MeasuredRMSNorm(nn.Module):
    def __init__(self, norm: nn.RMSNorm) -> None:
        super().__init__()
        self.weight, self.eps = norm.weight, norm.eps if norm.eps is not None else 1e-6

    def forward(self, x: Tensor) -> Tensor:
        return _CudaRMSNorm.apply(x, self.weight, self.eps)


def _gpu_like_block(args: ModelArgs) -> nn.Module:
    with torch.device("cpu"):
        block: nn.Module = block_class(args)(args)
    block = block.to(torch.bfloat16)
    for name, module in list(block.named_children()):
        if isinstance(module, nn.RMSNorm):
            setattr(block, name, _MeasuredRMSNorm(module))
    return block


def _saved_bytes(block: nn.Module, args: ModelArgs, batch: int, seq: int) -> int:
    parameters = {param.untyped_storage().data_ptr() for param in block.parameters()}
    saved: dict[int, int] = {}

    def pack(tensor: Tensor) -> Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in parameters:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    x = torch.randn(batch, seq, args.dim, dtype=torch.bfloat16, requires_grad=True)
    cos, sin = rotary_cos_sin(model_inverse_frequencies(args, x.device), seq)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        block(x, cos, sin)
    return sum(saved.values())


def measured_block_bytes_per_token(args: ModelArgs, seq: int = MEASURE_SEQ) -> float:
    """Bytes one block keeps for backward per token, bf16, no checkpointing, fused attention (see module doc)."""
    block = _gpu_like_block(args)
    with torch.no_grad():
        for param in block.parameters():
            param.normal_(0, 0.02)
    return (_saved_bytes(block, args, 2, seq) - _saved_bytes(block, args, 1, seq)) / seq


@user_errors
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="1b")
    parser.add_argument("--instance", default="p5.48xlarge")
    parser.add_argument("--nodes", type=int, default=1)
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=4)
    options = parser.parse_args(argv)
    args = get_model_args(options.model)
    measured = measured_block_bytes_per_token(args)
    planned = block_activation_bytes_per_token(args, "none", "flash", options.seq)
    estimate = memory_per_device(args, options.instance, options.nodes, options.seq, options.batch, "none")
    tokens = options.batch * options.seq
    measured_activations = args.n_layers * tokens * measured / GIB
    total = estimate.total_gib - estimate.activations_gib + measured_activations
    print(f"{options.model}: block activations {measured:,.0f} bytes/token measured, {planned:,.0f} planned")
    print(
        f"{options.instance} x {options.nodes}, micro-batch {options.batch} x seq {options.seq}, no checkpointing: "
        f"activations {measured_activations:.1f} GiB measured ({estimate.activations_gib:.1f} planned); "
        f"{total:.1f} GiB per device of {estimate.capacity_gib:.1f}: "
        f"{'fits' if total <= estimate.capacity_gib else 'does not fit'}"
    )
    print("planner: " + ", ".join(f"{name} {gib:.1f}" for name, gib in estimate.breakdown().items()) + " GiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
