"""The loss without full logits: same value and gradients as cross-entropy on the logits, and no tensor of the
logits' size kept for backward."""

import pytest
import torch
import torch.nn.functional as F

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
