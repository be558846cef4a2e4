"""The loss without full logits: same value and gradients as cross-entropy on the logits, and no tensor of the
logits' size kept for backward."""

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from training.models import ModelArgs
from training.models.loss import IGNORE_INDEX, chunked_cross_entropy
from training.models.transformer import build_model

ARGS = ModelArgs(flavor="llama", dim=32, n_layers=2, n_heads=4, ffn_dim=64, vocab_size=512, max_seq_len=64)


def _model(tied: bool) -> torch.nn.Module:
    model = build_model(ARGS.replace(tie_embeddings=tied), device="cpu")
    model.init_weights(seed=3)
    return model


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    tokens = torch.randint(0, ARGS.vocab_size, (2, 49), generator=torch.Generator().manual_seed(0))
    labels = tokens[:, 1:].clone()
    labels[0, :5] = IGNORE_INDEX
    return tokens[:, :-1], labels


@pytest.mark.parametrize("tied", [False, True], ids=["untied", "tied"])
def test_same_loss_and_gradients_as_cross_entropy_on_the_logits(tied: bool) -> None:
    ids, labels = _batch()
    reference_model, model = _model(tied), _model(tied)
    logits = reference_model(ids)
    expected = F.cross_entropy(
        logits.float().flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX, reduction="sum"
    )
    expected.backward()
    loss = model(ids, labels=labels)
    loss.backward()
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss, expected, rtol=1e-6, atol=1e-5)
    for (name, param), reference in zip(model.named_parameters(), reference_model.parameters(), strict=True):
        torch.testing.assert_close(param.grad, reference.grad, rtol=1e-5, atol=1e-6, msg=name)


def _largest_saved(run) -> int:  # type: ignore[no-untyped-def]
    sizes: list[int] = []

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        sizes.append(tensor.numel())
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        run()
    return max(sizes)


@pytest.mark.parametrize("tied", [False, True], ids=["untied", "tied"])
def test_no_tensor_of_the_logits_size_is_kept_for_backward(tied: bool) -> None:
    ids, labels = _batch()
    model = _model(tied)
    logits_numel = ids.numel() * ARGS.vocab_size
    on_logits = _largest_saved(
        lambda: F.cross_entropy(model(ids).float().flatten(0, 1), labels.flatten(), reduction="sum")
    )
    assert on_logits >= logits_numel  # the usual way keeps them (and their fp32 copy)
    chunked = _largest_saved(lambda: model(ids, labels=labels))
    assert chunked < logits_numel  # the largest is a weight matrix (512 x 32), not the logits (96 x 512)


def test_chunks_add_up_whatever_the_chunk_size() -> None:
    hidden = torch.randn(37, 16, dtype=torch.float64)
    weight = torch.randn(50, 16, dtype=torch.float64)
    labels = torch.randint(0, 50, (37,))
    whole = F.cross_entropy(hidden @ weight.T, labels, reduction="sum")
    for chunk in (1, 5, 37, 100):
        torch.testing.assert_close(
            chunked_cross_entropy(hidden, weight, labels, chunk).double(), whole, rtol=1e-6, atol=0
        )


def _head_inputs(dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    hidden = torch.randn(70, 24, generator=generator, dtype=dtype)
    weight = torch.randn(300, 24, generator=generator, dtype=dtype) / 5
    labels = torch.randint(0, 300, (70,), generator=generator)
    labels[3:9] = IGNORE_INDEX
    labels[40:70] = IGNORE_INDEX  # a whole chunk of 16 ignored, and part of the next
    return hidden, weight, labels


def _loss_and_grads(loss_of, hidden: torch.Tensor, weight: torch.Tensor, scale: float = 1.0):  # type: ignore[no-untyped-def]
    hidden, weight = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
    loss = loss_of(hidden, weight)
    (loss * scale).backward()
    return loss.detach(), hidden.grad, weight.grad


def _unfused(labels: torch.Tensor):  # type: ignore[no-untyped-def]
    return lambda hidden, weight: F.cross_entropy(
        F.linear(hidden, weight).float(), labels, ignore_index=IGNORE_INDEX, reduction="sum"
    )


@pytest.mark.parametrize("chunk", [16, 70, 4096])
def test_fp32_loss_and_gradients_equal_the_unfused_loss_with_ignored_labels(chunk: int) -> None:
    hidden, weight, labels = _head_inputs()
    expected = _loss_and_grads(_unfused(labels), hidden, weight, scale=0.37)
    fused = _loss_and_grads(lambda h, w: chunked_cross_entropy(h, w, labels, chunk), hidden, weight, scale=0.37)
    for got, want, name in zip(fused, expected, ("loss", "hidden grad", "weight grad"), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6, msg=name)
    assert fused[1][3:9].abs().max() == 0 and fused[1][40:].abs().max() == 0  # ignored tokens get no gradient


def _errors(got, truth):  # type: ignore[no-untyped-def]
    return [(g.double() - t).abs().max().item() for g, t in zip(got, truth, strict=True)]


@pytest.mark.parametrize("chunk", [16, 4096])
@pytest.mark.parametrize("precision", ["autocast", "bf16 parameters"])
def test_bf16_loss_and_gradients_as_accurate_as_the_unfused_loss(chunk: int, precision: str) -> None:
    """bf16 matmuls (autocast, or bf16 parameters as under FSDP2's policy) and fp32 softmax on both sides: the loss
    equals the unfused one, and each gradient's largest error against an fp64 computation is at most twice the
    unfused loss's (the fused one rounds each chunk's weight-gradient matmul to bf16 before the fp32 sum)."""
    hidden, weight, labels = _head_inputs(torch.bfloat16 if precision == "bf16 parameters" else torch.float32)
    truth = _loss_and_grads(_unfused(labels), hidden.double(), weight.double())
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "autocast"):
        expected = _loss_and_grads(_unfused(labels), hidden, weight)
        fused = _loss_and_grads(lambda h, w: chunked_cross_entropy(h, w, labels, chunk), hidden, weight)
    assert fused[0].dtype == torch.float32
    assert fused[1].dtype == expected[1].dtype and fused[2].dtype == expected[2].dtype
    torch.testing.assert_close(fused[0], expected[0], rtol=1e-6, atol=1e-5)  # same bf16 logits, fp32 softmax
    fused_errors, unfused_errors = _errors(fused[1:], truth[1:]), _errors(expected[1:], truth[1:])
    for fused_error, unfused_error, name in zip(fused_errors, unfused_errors, ("hidden", "weight"), strict=True):
        assert 0 < fused_error <= 2 * unfused_error, f"{name} gradient: {fused_error} vs {unfused_error}"


def test_the_head_matmul_runs_once_per_step_not_again_in_backward() -> None:
    """Forward + backward cost three head matmuls (logits, hidden grad, weight grad); recomputing the logits in
    backward (activation checkpointing of the loss) would make it four."""
    hidden, weight, labels = _head_inputs()
    with FlopCounterMode(display=False) as counter:
        _loss_and_grads(lambda h, w: chunked_cross_entropy(h, w, labels, 16), hidden, weight)
    head_matmul = 2 * hidden.shape[0] * hidden.shape[1] * weight.shape[0]
    assert counter.get_total_flops() == 3 * head_matmul


def test_no_gradient_work_without_autograd() -> None:
    hidden, weight, labels = _head_inputs()
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        loss = chunked_cross_entropy(hidden, weight, labels, 16)
    assert counter.get_total_flops() == 2 * hidden.shape[0] * hidden.shape[1] * weight.shape[0]
    torch.testing.assert_close(loss, _unfused(labels)(hidden, weight), rtol=1e-6, atol=1e-5)
