import itertools

import pytest
import torch

from training.config import OptimSection
from training.models import ModelArgs
from training.models.transformer import build_model
from training.optim import build_optimizer, learning_rate


def test_linear_warmup_then_cosine_to_ten_percent() -> None:
    section = OptimSection(lr=3e-4, warmup_steps=10)
    lrs = [learning_rate(section, step, max_steps=110) for step in range(1, 121)]
    assert lrs[0] == pytest.approx(3e-5)
    assert lrs[9] == pytest.approx(3e-4)  # step 10: peak
    assert lrs[59] == pytest.approx(3e-5 + 0.5 * (3e-4 - 3e-5))  # halfway through the decay
    assert lrs[109] == pytest.approx(3e-5)  # step 110: the floor, 10 % of peak
    assert lrs[119] == pytest.approx(3e-5)  # and it stays there
    assert all(a >= b for a, b in itertools.pairwise(lrs[9:]))


def test_decay_steps_can_differ_from_max_steps() -> None:
    section = OptimSection(lr=1.0, warmup_steps=0, decay_steps=20, min_lr_ratio=0.0)
    assert learning_rate(section, 20, max_steps=100) == pytest.approx(0.0)
    assert learning_rate(section, 10, max_steps=100) == pytest.approx(0.5)


def test_adamw_decays_matrices_but_not_norms_or_biases() -> None:
    args = ModelArgs(flavor="neox", dim=16, n_layers=1, n_heads=2, ffn_dim=32, vocab_size=10)
    model = build_model(args, device="cpu")
    optimizer = build_optimizer(model, OptimSection(), torch.device("cpu"))
    decayed, plain = optimizer.param_groups
    assert decayed["weight_decay"] == 0.1 and plain["weight_decay"] == 0.0
    assert all(p.ndim == 2 for p in decayed["params"]) and all(p.ndim == 1 for p in plain["params"])
    assert len(decayed["params"]) + len(plain["params"]) == len(list(model.parameters()))
    assert decayed["betas"] == (0.9, 0.95)
    assert optimizer.defaults["fused"] is True  # on CPU too: the loss guard skips a step through it
