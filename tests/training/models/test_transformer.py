import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend

from training.models import ModelArgs
from training.models.attention import SDPA_PRIORITY
from training.models.transformer import build_model

LLAMA = ModelArgs(
    flavor="llama", dim=32, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=64, vocab_size=97, max_seq_len=16
)
NEOX = ModelArgs(
    flavor="neox", dim=32, n_layers=2, n_heads=4, ffn_dim=128, vocab_size=97, rotary_pct=0.25, max_seq_len=16
)


def _model(args: ModelArgs, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    model = build_model(args, device="cpu")
    model.init_weights()
    return model


@pytest.mark.parametrize("args", [LLAMA, NEOX, LLAMA.replace(tie_embeddings=True)], ids=["llama", "neox", "tied"])
def test_logits_shape_and_causality(args: ModelArgs) -> None:
    model = _model(args)
    ids = torch.randint(0, args.vocab_size, (2, 12))
    logits = model(ids)
    assert logits.shape == (2, 12, args.vocab_size)
    changed = ids.clone()
    changed[:, 8:] = (changed[:, 8:] + 1) % args.vocab_size
    torch.testing.assert_close(model(changed)[:, :8], logits[:, :8])
    assert not torch.allclose(model(changed)[:, 8:], logits[:, 8:])


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("args", [LLAMA, NEOX], ids=["llama", "neox"])
def test_a_few_adam_steps_overfit_one_batch(args: ModelArgs) -> None:
    model = _model(args)
    ids = torch.randint(0, args.vocab_size, (4, 16))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(30):
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, args.vocab_size), ids[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[0] == pytest.approx(torch.log(torch.tensor(float(args.vocab_size))).item(), rel=0.1)
    assert losses[-1] < 0.5 * losses[0]


def test_init_is_deterministic_and_scales_residual_projections() -> None:
    a, b = _model(LLAMA, seed=3), _model(LLAMA, seed=3)
    for (name, pa), pb in zip(a.named_parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb), name
    block = a.layers[0]
    assert block.attention.wo.weight.std() < 0.7 * block.attention.wq.weight.std()


def test_sequence_longer_than_max_seq_len_is_refused() -> None:
    model = _model(LLAMA)
    with pytest.raises(ValueError, match=r"input_ids: sequence length 17 exceeds model\.max_seq_len 16"):
        model(torch.zeros(1, 17, dtype=torch.long))


def test_attention_runs_with_torchtitans_backend_priority(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[int]] = []
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def recording(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(torch._C._get_sdp_priority_order())
        return sdpa(*args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", recording)
    args = ModelArgs(flavor="llama", dim=32, n_layers=1, n_heads=4, ffn_dim=64, vocab_size=16)
    model = build_model(args, device="cpu")
    model.init_weights(seed=0)
    model(torch.randint(0, 16, (1, 8)))
    cudnn, flash, efficient, math = (int(b) for b in SDPA_PRIORITY)
    assert seen and seen[0][:4] == [cudnn, flash, efficient, math]
    assert (cudnn, flash) == (int(SDPBackend.CUDNN_ATTENTION), int(SDPBackend.FLASH_ATTENTION))
    assert torch._C._get_sdp_priority_order()[:4] != seen[0][:4]  # set for the call only
