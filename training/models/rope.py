"""Rotary position embedding in the rotate-half layout, with partial rotation done by zero frequencies.

Partial rotary (GPT-NeoX, Pythia: 25 % of each head) is usually written as "rotate the first rotary_dim dims,
concatenate the rest unchanged". Here every head dim goes through the same rotation and the dims that should not
rotate get frequency 0 (cos 1, sin 0), which keeps one code path and no slicing/concatenation (the trick of "Frugality meets Accuracy: Cost-efficient training of GPT NeoX and Pythia models with AWS Trainium",
https://aws.amazon.com/blogs/machine-learning/frugality-meets-accuracy-cost-efficient-training-of-gpt-neox-and-pythia-models-with-aws-trainium/).

Rotate-half pairs dim j with dim j + head_dim/2, while the concatenation form pairs j with j + rotary_dim/2, so
the two forms agree up to a fixed permutation of head dims (`zero_frequency_order`). Applied to both query and
key it leaves every attention score unchanged; HF NeoX weights are permuted once at load/export time.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from training.models.args import ModelArgs


def inverse_frequencies(head_dim: int, rotary_dim: int, theta: float, device: torch.device | None = None) -> Tensor:
    """head_dim/2 frequencies: the usual theta^(-2i/rotary_dim) ladder, then zeros for the unrotated pairs."""
    rotated = 1.0 / (theta ** (torch.arange(0, rotary_dim, 2, dtype=torch.float32, device=device) / rotary_dim))
    unrotated = torch.zeros((head_dim - rotary_dim) // 2, dtype=torch.float32, device=device)
    return torch.cat([rotated, unrotated])


def llama3_scaled(
    inv_freq: Tensor, factor: float, low_freq_factor: float, high_freq_factor: float, original_max_seq_len: int
) -> Tensor:
    """Llama 3.1+ RoPE scaling: wavelengths shorter than original_max_seq_len / high_freq_factor are kept, those
    longer than original_max_seq_len / low_freq_factor are stretched by `factor`, and the band between is a linear
    blend of the two, weighted by where original_max_seq_len / wavelength falls between the two factors."""
    wavelength = 2 * math.pi / inv_freq
    blend = ((original_max_seq_len / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor)).clamp(0, 1)
    return (1 - blend) * inv_freq / factor + blend * inv_freq


def model_inverse_frequencies(args: ModelArgs, device: torch.device | None = None) -> Tensor:
    """The head_dim/2 frequencies a model rotates with: the plain ladder, scaled per args.rope_type."""
    inv_freq = inverse_frequencies(args.head_dim, args.rotary_dim, args.rope_theta, device)
    if args.rope_type == "default":
        return inv_freq
    rotated = inv_freq[: args.rotary_dim // 2]  # the zero frequencies of partial rotary stay zero
    scaled = llama3_scaled(
        rotated, args.rope_factor, args.rope_low_freq_factor, args.rope_high_freq_factor, args.rope_original_max_seq_len
    )
    return torch.cat([scaled, inv_freq[args.rotary_dim // 2 :]])


def rotary_cos_sin(inv_freq: Tensor, seq_len: int) -> tuple[Tensor, Tensor]:
    """cos and sin of shape [seq_len, head_dim] in float32."""
    positions = torch.arange(seq_len, dtype=torch.float32, device=inv_freq.device)
    angles = torch.outer(positions, inv_freq)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def rotary_cos_sin_at(inv_freq: Tensor, position_ids: Tensor) -> tuple[Tensor, Tensor]:
    """cos and sin at given positions: position_ids [B, S] -> [B, 1, S, head_dim] float32 (broadcast over heads)."""
    angles = position_ids.to(torch.float32).unsqueeze(-1) * inv_freq
    angles = torch.cat([angles, angles], dim=-1).unsqueeze(1)
    return angles.cos(), angles.sin()


def rotate_half(x: Tensor) -> Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat([-second, first], dim=-1)


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """x: [batch, heads, seq, head_dim]; rotation computed in at least float32, returned in x's dtype."""
    wide = x.to(torch.promote_types(x.dtype, torch.float32))
    return (wide * cos + rotate_half(wide) * sin).to(x.dtype)


def apply_rotary_concatenated(x: Tensor, rotary_dim: int, theta: float) -> Tensor:
    """Reference form (HF GPT-NeoX): rotate the first rotary_dim dims, pass the rest through unchanged."""
    rotated, passed = x[..., :rotary_dim], x[..., rotary_dim:]
    cos, sin = rotary_cos_sin(inverse_frequencies(rotary_dim, rotary_dim, theta, x.device), x.shape[-2])
    return torch.cat([apply_rotary(rotated, cos, sin), passed], dim=-1)


def zero_frequency_order(head_dim: int, rotary_dim: int) -> list[int]:
    """Head-dim permutation from the concatenation layout to the zero-frequency layout.

    zero_frequency_form(x[..., order]) == concatenation_form(x)[..., order]. The concatenation layout is
    [rot_a | rot_b | pass] (rot_a pairs with rot_b); the zero-frequency layout is [rot_a | pass_a | rot_b | pass_b].
    """
    half_rot, half_pass = rotary_dim // 2, (head_dim - rotary_dim) // 2
    rot_a = list(range(half_rot))
    rot_b = list(range(half_rot, rotary_dim))
    pass_a = list(range(rotary_dim, rotary_dim + half_pass))
    pass_b = list(range(rotary_dim + half_pass, head_dim))
    return rot_a + pass_a + rot_b + pass_b
