import pytest
import torch
from torch import nn

from training.parallel.precision import unsharded_autocast, uses_bf16


@pytest.mark.parametrize(
    ("mode", "device", "expected"),
    [
        ("auto", "cuda", True),
        ("auto", "cpu", False),
        ("bf16", "cpu", True),
        ("bf16", "cuda", True),
        ("fp32", "cuda", False),
        ("fp32", "cpu", False),
    ],
)
def test_bf16_applies_where_the_mode_says(mode: str, device: str, expected: bool) -> None:
    assert uses_bf16(mode, torch.device(device)) is expected


@pytest.mark.parametrize(
    ("mode", "dtype"), [("bf16", torch.bfloat16), ("fp32", torch.float32), ("auto", torch.float32)]
)
def test_a_plain_model_computes_in_the_modes_dtype_and_keeps_fp32_parameters(mode: str, dtype: torch.dtype) -> None:
    layer = nn.Linear(8, 4)
    with unsharded_autocast(mode, torch.device("cpu")):
        out = layer(torch.randn(2, 8))
    out.float().sum().backward()
    assert out.dtype == dtype
    assert layer.weight.dtype == torch.float32 and layer.weight.grad is not None
    assert layer.weight.grad.dtype == torch.float32
