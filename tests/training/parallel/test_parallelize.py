"""AC modes and per-block compile change memory/speed, never the numbers: same loss and gradients as plain FSDP2."""

import pytest
import torch
import torch.nn.functional as F
from torch.distributed.tensor import DTensor

from training.config import ActivationCheckpointSection, ParallelSection
from training.models import ModelArgs
from training.models.transformer import build_model
from training.parallel import activation_checkpoint
from training.parallel.activation_checkpoint import checkpointed_blocks, recomputed_fraction
from training.parallel.fsdp import mixed_precision_policy
from training.parallel.mesh import DataParallelShape, build_mesh
from training.parallel.parallelize import parallelize, plain_name

ARGS = ModelArgs(flavor="llama", dim=32, n_layers=3, n_heads=4, n_kv_heads=2, ffn_dim=64, vocab_size=64, max_seq_len=16)


def _loss_and_grads(section: ParallelSection, sharded: bool = True) -> tuple[float, dict[str, torch.Tensor]]:
    torch.manual_seed(0)
    model = build_model(ARGS, device="meta")
    mesh = build_mesh(DataParallelShape(replicate=1, shard=1), "cpu") if sharded else None
    parallelize(model, section, mesh, mixed_precision_policy("auto", torch.device("cpu")))
    model.to_empty(device="cpu")
    torch.manual_seed(1)
    model.init_weights()
    ids = torch.randint(0, ARGS.vocab_size, (2, 16), generator=torch.Generator().manual_seed(2))
    loss = F.cross_entropy(model(ids[:, :-1]).flatten(0, 1), ids[:, 1:].flatten())
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
        ParallelSection(activation_checkpoint=ActivationCheckpointSection(mode="every_n", every_n=2)),
        ParallelSection(activation_checkpoint=ActivationCheckpointSection(mode="selective")),
        ParallelSection(compile=True, compile_backend="aot_eager"),
    ],
    ids=["full", "every_2", "selective", "compile"],
)
def test_same_loss_and_gradients_as_plain_fsdp(section: ParallelSection) -> None:
    base_loss, base_grads = _loss_and_grads(ParallelSection())
    loss, grads = _loss_and_grads(section)
    assert loss == pytest.approx(base_loss, abs=1e-6)
    assert grads.keys() == base_grads.keys()
    for name, grad in grads.items():
        torch.testing.assert_close(grad, base_grads[name], rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.usefixtures("process_group")
@pytest.mark.parametrize("mode", ["none", "full"])
def test_without_a_mesh_the_model_stays_plain_and_computes_the_same(mode: str) -> None:
    section = ParallelSection(activation_checkpoint=ActivationCheckpointSection(mode=mode))  # type: ignore[arg-type]
    sharded_loss, sharded_grads = _loss_and_grads(section)
    loss, grads = _loss_and_grads(section, sharded=False)
    assert loss == pytest.approx(sharded_loss, abs=1e-6)
    assert grads.keys() == sharded_grads.keys()
    for name, grad in grads.items():
        torch.testing.assert_close(grad, sharded_grads[name], rtol=1e-5, atol=1e-6, msg=name)
    plain = build_model(ARGS, device="meta")
    parallelize(plain, section, None, mixed_precision_policy("auto", torch.device("cpu")))
    assert not any(isinstance(param, DTensor) for param in plain.parameters())


@pytest.mark.usefixtures("process_group")
def test_selective_mode_saves_matmuls_and_recomputes_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    decisions: list[tuple[str, str]] = []
    policy = activation_checkpoint._save_matmuls

    def recording_policy(ctx, op, *args, **kwargs):  # type: ignore[no-untyped-def]
        decision = policy(ctx, op, *args, **kwargs)
        decisions.append((str(op), decision.name))
        return decision

    monkeypatch.setattr(activation_checkpoint, "_save_matmuls", recording_policy)
    _loss_and_grads(ParallelSection(activation_checkpoint=ActivationCheckpointSection(mode="selective")))
    saved = {op for op, decision in decisions if decision == "MUST_SAVE"}
    recomputed = {op for op, decision in decisions if decision == "PREFER_RECOMPUTE"}
    assert any("mm" in op for op in saved), saved
    assert any("scaled_dot_product" in op for op in saved), saved
    assert any("silu" in op for op in recomputed), recomputed


@pytest.mark.usefixtures("process_group")
def test_wrappers_leave_state_dict_names_alone() -> None:
    model = build_model(ARGS, device="meta")
    names = set(model.state_dict())
    section = ParallelSection(activation_checkpoint=ActivationCheckpointSection(mode="full"))
    parallelize(
        model, section, build_mesh(DataParallelShape(1, 1), "cpu"), mixed_precision_policy("fp32", torch.device("cpu"))
    )
    assert any("_checkpoint_wrapped_module" in name for name, _ in model.named_parameters())
    assert {plain_name(name) for name, _ in model.named_parameters()} == names


def test_every_n_blocks_and_recompute_fractions() -> None:
    every_3 = ActivationCheckpointSection(mode="every_n", every_n=3)
    assert checkpointed_blocks(every_3, 7) == [0, 3, 6]
    assert recomputed_fraction(every_3, 7) == pytest.approx(3 / 7)
    assert recomputed_fraction(ActivationCheckpointSection(mode="full"), 7) == 1.0
    assert recomputed_fraction(ActivationCheckpointSection(mode="selective"), 7) == 0.0  # matmuls are kept


def test_bf16_on_gpu_fp32_on_cpu() -> None:
    assert mixed_precision_policy("auto", torch.device("cpu")).param_dtype is None
    gpu = mixed_precision_policy("auto", torch.device("cuda", 0))
    assert (gpu.param_dtype, gpu.reduce_dtype) == (torch.bfloat16, torch.float32)
    assert mixed_precision_policy("bf16", torch.device("cpu")).param_dtype == torch.bfloat16
