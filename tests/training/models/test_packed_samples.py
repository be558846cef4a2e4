"""Packed SFT rows: position ids restart per sample and attention stays inside each sample."""

import pytest
import torch
import torch.nn.functional as F

from training.models import ModelArgs
from training.models.loss import IGNORE_INDEX
from training.models.transformer import build_model

LLAMA = ModelArgs(
    flavor="llama", dim=32, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=64, vocab_size=97, max_seq_len=16
)
NEOX = ModelArgs(
    flavor="neox", dim=32, n_layers=2, n_heads=4, ffn_dim=128, vocab_size=97, rotary_pct=0.25, max_seq_len=16
)
# One row: sample 1 (6 tokens), sample 2 (7 tokens), then 3 padding tokens of their own document.
DOCUMENTS = torch.tensor([[0] * 6 + [1] * 7 + [2] * 3])
POSITIONS = torch.tensor([list(range(6)) + list(range(7)) + list(range(3))])


def _model(args: ModelArgs) -> torch.nn.Module:
    torch.manual_seed(0)
    model = build_model(args, device="cpu")
    model.init_weights()
    return model


@pytest.mark.parametrize("args", [LLAMA, NEOX], ids=["llama", "neox"])
def test_changing_sample_1_leaves_the_logits_of_sample_2_in_the_same_row_unchanged(args: ModelArgs) -> None:
    model = _model(args)
    ids = torch.randint(1, args.vocab_size, (1, 16))
    logits = model(ids, position_ids=POSITIONS, document_ids=DOCUMENTS)
    changed = ids.clone()
    changed[0, :6] = (changed[0, :6] + 5) % args.vocab_size
    again = model(changed, position_ids=POSITIONS, document_ids=DOCUMENTS)
    torch.testing.assert_close(again[:, 6:13], logits[:, 6:13])
    assert not torch.allclose(again[:, :6], logits[:, :6])
    # And sample 2 in the row is sample 2 alone at positions 0..6: packing changes nothing it sees.
    torch.testing.assert_close(model(ids[:, 6:13]), logits[:, 6:13])
    # Without the document mask sample 2 would have attended to sample 1.
    assert not torch.allclose(model(changed, position_ids=POSITIONS)[:, 6:13], logits[:, 6:13])


def test_the_masked_loss_is_the_sum_over_trained_tokens_that_a_hand_computation_gives() -> None:
    model = _model(LLAMA)
    ids = torch.randint(1, LLAMA.vocab_size, (2, 16))
    labels = torch.randint(1, LLAMA.vocab_size, (2, 16))
    trained = torch.rand(2, 16) < 0.4
    masked = torch.where(trained, labels, IGNORE_INDEX)
    documents = torch.cat([DOCUMENTS, DOCUMENTS])
    positions = torch.cat([POSITIONS, POSITIONS])
    summed = model(ids, labels=masked, position_ids=positions, document_ids=documents)
    logits = model(ids, position_ids=positions, document_ids=documents).float()
    log_probs = logits.log_softmax(-1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    by_hand = -(log_probs * trained).sum()
    torch.testing.assert_close(summed, by_hand, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(
        summed / trained.sum(), F.cross_entropy(logits[trained], labels[trained]), rtol=1e-5, atol=1e-5
    )
