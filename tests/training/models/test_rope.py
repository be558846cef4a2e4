import torch

from training.models.rope import (
    apply_rotary,
    apply_rotary_concatenated,
    inverse_frequencies,
    rotary_cos_sin,
    zero_frequency_order,
)


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
