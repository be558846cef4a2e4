"""A mixture-of-experts model under the FSDP2 wrappers: every activation checkpointing mode and per-block compile
give plain FSDP2's loss (cross-entropy plus the router's auxiliary loss) and gradients, router ones included."""

from __future__ import annotations

import pytest
import torch
from torch.distributed.tensor import DTensor

from training.config import ActivationCheckpointSection, ParallelSection
from training.models.registry import get_model_args
from training.models.transformer import build_model
from training.parallel.dims import ParallelDims
from training.parallel.fsdp import mixed_precision_policy
from training.parallel.mesh import build_mesh
from training.parallel.parallelize import parallelize, plain_name

ARGS = get_model_args("qwen3-moe-tiny").replace(n_layers=3, vocab_size=64, max_seq_len=16, router_aux_loss_coef=0.1)


def _loss_and_grads(section: ParallelSection) -> tuple[float, dict[str, torch.Tensor]]:
    model = build_model(ARGS, device="meta")
    mesh = build_mesh(ParallelDims(dp_replicate=1, dp_shard=1), "cpu")
    parallelize(model, section, mesh, mixed_precision_policy("auto", torch.device("cpu")))
    model.to_empty(device="cpu")
    model.init_weights(seed=1)
    ids = torch.randint(0, ARGS.vocab_size, (2, 16), generator=torch.Generator().manual_seed(2))
    loss = model(ids[:, :-1], labels=ids[:, 1:])
    loss.backward()
    grads = {}
    for name, param in model.named_parameters():
        grad = param.grad.full_tensor() if isinstance(param.grad, DTensor) else param.grad
        grads[plain_name(name)] = grad
    return loss.item(), grads


@pytest.mark.usefixtures("process_group")
@pytest.mark.parametrize(
    "section",
    [
        ParallelSection(activation_checkpoint=ActivationCheckpointSection(mode="full")),
        ParallelSection(activation_checkpoint=ActivationCheckpointSection(mode="selective")),
        ParallelSection(compile=True, compile_backend="aot_eager"),
    ],
    ids=["full", "selective", "compile"],
)
def test_moe_gives_plain_fsdps_loss_and_gradients(section: ParallelSection) -> None:
    base_loss, base_grads = _loss_and_grads(ParallelSection())
    loss, grads = _loss_and_grads(section)
    assert loss == pytest.approx(base_loss, abs=1e-5)
    assert grads.keys() == base_grads.keys()
    assert base_grads["layers.0.feed_forward.router.gate.weight"].abs().sum() > 0
    for name, grad in grads.items():
        torch.testing.assert_close(grad, base_grads[name], rtol=1e-5, atol=1e-6, msg=name)
