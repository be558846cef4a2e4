import json
import math
import os
import subprocess
from pathlib import Path

import pytest
import torch

from training.models import ModelArgs
from training.models.rope import (
    apply_rotary,
    apply_rotary_concatenated,
    inverse_frequencies,
    model_inverse_frequencies,
    rotary_cos_sin,
    zero_frequency_order,
)
from training.models.transformer import build_model


def _zero_frequency_form(x: torch.Tensor, rotary_dim: int, theta: float) -> torch.Tensor:
    cos, sin = rotary_cos_sin(inverse_frequencies(x.shape[-1], rotary_dim, theta), x.shape[-2])
    return apply_rotary(x, cos, sin)


def test_partial_rotary_by_zero_frequencies_equals_concatenation_form() -> None:
    torch.manual_seed(0)
    head_dim, rotary_dim, theta = 64, 16, 10000.0  # rotary_pct 0.25 as in Pythia / NeoX
    x = torch.randn(2, 3, 11, head_dim, dtype=torch.float64)
    order = zero_frequency_order(head_dim, rotary_dim)

    reference = apply_rotary_concatenated(x, rotary_dim, theta)
    zero_freq = _zero_frequency_form(x[..., order], rotary_dim, theta)

    torch.testing.assert_close(zero_freq, reference[..., order], rtol=0, atol=1e-12)


def test_attention_scores_agree_without_undoing_the_permutation() -> None:
    torch.manual_seed(1)
    head_dim, rotary_dim, theta = 32, 8, 10000.0
    q = torch.randn(1, 2, 9, head_dim, dtype=torch.float64)
    k = torch.randn(1, 2, 9, head_dim, dtype=torch.float64)
    order = zero_frequency_order(head_dim, rotary_dim)

    reference = apply_rotary_concatenated(q, rotary_dim, theta) @ apply_rotary_concatenated(k, rotary_dim, theta).mT
    ours = (
        _zero_frequency_form(q[..., order], rotary_dim, theta)
        @ _zero_frequency_form(k[..., order], rotary_dim, theta).mT
    )

    torch.testing.assert_close(ours, reference, rtol=0, atol=1e-10)


def test_unrotated_dims_pass_through_unchanged() -> None:
    head_dim, rotary_dim = 16, 4
    x = torch.randn(1, 1, 5, head_dim)
    out = _zero_frequency_form(x, rotary_dim, 10000.0)
    unrotated = [i for i in range(head_dim) if i % (head_dim // 2) >= rotary_dim // 2]
    torch.testing.assert_close(out[..., unrotated], x[..., unrotated])
    assert not torch.allclose(out[..., 1:, 0], x[..., 1:, 0])


def test_full_rotary_has_no_zero_frequencies_and_identity_order() -> None:
    assert bool((inverse_frequencies(64, 64, 10000.0) > 0).all())
    assert zero_frequency_order(64, 64) == list(range(64))


def test_position_zero_is_not_rotated() -> None:
    x = torch.randn(1, 1, 4, 8)
    out = _zero_frequency_form(x, 8, 10000.0)
    torch.testing.assert_close(out[..., 0, :], x[..., 0, :])


# Llama 3.1 8B and Llama 3.2 1B as published in their config.json files (rope_scaling / rope_parameters).
LLAMA31 = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
LLAMA32 = {**LLAMA31, "factor": 32.0}


def _llama3_published(head_dim: int, theta: float, scaling: dict[str, float]) -> list[float]:
    """Meta's reference `apply_scaling` (llama-models, Llama 3.1), one frequency at a time in float64."""
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old_context = scaling["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old_context / low, old_context / high
    out = []
    for i in range(0, head_dim, 2):
        freq = 1.0 / theta ** (i / head_dim)
        wavelen = 2 * math.pi / freq
        if wavelen < high_wavelen:
            out.append(freq)
        elif wavelen > low_wavelen:
            out.append(freq / factor)
        else:
            smooth = (old_context / wavelen - low) / (high - low)
            out.append((1 - smooth) * freq / factor + smooth * freq)
    return out


@pytest.mark.parametrize("scaling", [LLAMA31, LLAMA32], ids=["llama3.1", "llama3.2"])
def test_llama3_scaling_follows_the_published_formula(scaling: dict[str, float]) -> None:
    args = ModelArgs(
        flavor="llama", dim=4096, n_layers=1, n_heads=32, ffn_dim=64, vocab_size=8, rope_theta=5e5,
        rope_type="llama3", rope_factor=scaling["factor"], rope_low_freq_factor=scaling["low_freq_factor"],
        rope_high_freq_factor=scaling["high_freq_factor"],
        rope_original_max_seq_len=int(scaling["original_max_position_embeddings"]),
    )  # fmt: skip
    expected = torch.tensor(_llama3_published(128, 5e5, scaling), dtype=torch.float32)
    scaled = model_inverse_frequencies(args)
    torch.testing.assert_close(scaled, expected, rtol=1e-6, atol=0)
    plain = model_inverse_frequencies(args.replace(rope_type="default"))
    assert torch.equal(scaled[:10], plain[:10])  # high frequencies (short wavelengths) are left alone
    torch.testing.assert_close(scaled[-5:], plain[-5:] / scaling["factor"])  # the lowest are divided by factor
    medium = (scaled != plain) & (scaled != plain / scaling["factor"])
    assert medium.any()  # and some in between are interpolated


# transformers' own llama3 frequencies (modeling_rope_utils), run in .nemo-venv: transformers' pins clash with .venv's.
# That transformers (4.51.3, NeMo 2.4.0's) reads scaling from rope_scaling; the rope_parameters form of transformers 5
# is read by training.models.hf (tests/training/models/test_hf.py) into the same ModelArgs.
_TRANSFORMERS_LLAMA3 = """
import json, sys
import transformers
from transformers import LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
scaling = json.loads(sys.argv[1])
config = LlamaConfig(hidden_size=4096, num_attention_heads=32, rope_theta=5e5, rope_scaling={"rope_type": "llama3", **scaling})
inverse, _ = ROPE_INIT_FUNCTIONS["llama3"](config, "cpu")
print(json.dumps({"version": transformers.__version__, "inverse": inverse.tolist()}))
"""


@pytest.mark.parametrize("scaling", [LLAMA31, LLAMA32], ids=["llama3.1", "llama3.2"])
def test_llama3_scaling_matches_transformers(nemo_python: Path, scaling: dict[str, float]) -> None:
    result = subprocess.run(
        [str(nemo_python), "-c", _TRANSFORMERS_LLAMA3, json.dumps(scaling)],
        capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    theirs = json.loads(result.stdout.splitlines()[-1])
    assert theirs["version"] == "4.51.3"
    args = ModelArgs(
        flavor="llama", dim=4096, n_layers=1, n_heads=32, ffn_dim=64, vocab_size=8, rope_theta=5e5,
        rope_type="llama3", rope_factor=scaling["factor"], rope_low_freq_factor=scaling["low_freq_factor"],
        rope_high_freq_factor=scaling["high_freq_factor"],
        rope_original_max_seq_len=int(scaling["original_max_position_embeddings"]),
    )  # fmt: skip
    expected = torch.tensor(theirs["inverse"], dtype=torch.float32)
    torch.testing.assert_close(model_inverse_frequencies(args), expected, rtol=1e-6, atol=0)


def test_the_model_rotates_with_the_scaled_frequencies() -> None:
    args = ModelArgs(flavor="llama", dim=32, n_layers=1, n_heads=2, ffn_dim=64, vocab_size=16, max_seq_len=64)
    torch.manual_seed(0)
    plain = build_model(args, device="cpu")
    plain.init_weights(seed=0)
    scaled = build_model(args.replace(rope_type="llama3", rope_factor=8.0, rope_original_max_seq_len=16), "cpu")
    scaled.load_state_dict(plain.state_dict())
    ids = torch.randint(0, 16, (1, 64))
    assert not torch.allclose(plain(ids), scaled(ids))
    assert torch.equal(plain(ids[:, :1]), scaled(ids[:, :1]))  # position 0 is not rotated either way
