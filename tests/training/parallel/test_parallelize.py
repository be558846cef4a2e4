"""AC modes and per-block compile change memory/speed, never the numbers: same loss and gradients as plain FSDP2."""

import pytest
import torch
import torch.nn.functional as F
from torch.distributed.fsdp import FSDPModule, fully_shard
from torch.distributed.tensor import DTensor

from training.config import ActivationCheckpointSection, ParallelSection
from training.models import ModelArgs
from training.models.transformer import build_model
from training.parallel import activation_checkpoint
from training.parallel.activation_checkpoint import checkpointed_blocks, recomputed_fraction
from training.parallel.dims import ParallelDims
from training.parallel.fsdp import mixed_precision_policy
from training.parallel.mesh import build_mesh
from training.parallel.parallelize import parallelize, plain_name

ARGS = ModelArgs(flavor="llama", dim=32, n_layers=3, n_heads=4, n_kv_heads=2, ffn_dim=64, vocab_size=64, max_seq_len=16)


def _loss_and_grads(section: ParallelSection, sharded: bool = True) -> tuple[float, dict[str, torch.Tensor]]:
    torch.manual_seed(0)
    model = build_model(ARGS, device="meta")
    mesh = build_mesh(ParallelDims(dp_replicate=1, dp_shard=1), "cpu") if sharded else None
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
def test_selective_mode_saves_attention_and_every_other_matmul_like_torchtitan(monkeypatch: pytest.MonkeyPatch) -> None:
    decisions: list[tuple[bool, str, str]] = []
    policy = activation_checkpoint.selective_policy

    def recording_policy(matmuls, ctx, op):  # type: ignore[no-untyped-def]
        decision = policy(matmuls, ctx, op)
        decisions.append((ctx.is_recompute, str(op), decision.name))
        return decision

    monkeypatch.setattr(activation_checkpoint, "selective_policy", recording_policy)
    _loss_and_grads(ParallelSection(activation_checkpoint=ActivationCheckpointSection(mode="selective")))
    forward = [(op, decision) for recompute, op, decision in decisions if not recompute]
    matmuls = [decision for op, decision in forward if op == "aten.mm.default"]
    # Llama block: q, k, v, o, gate, up, down = 7 matmuls per block, 3 blocks.
    assert matmuls[:7] == ["MUST_SAVE", "PREFER_RECOMPUTE"] * 3 + ["MUST_SAVE"]
    assert any("scaled_dot_product" in op and decision == "MUST_SAVE" for op, decision in forward)
    assert any("silu" in op and decision == "PREFER_RECOMPUTE" for op, decision in forward)
    assert matmuls[7:14] == matmuls[:7]  # each block call counts its own matmuls


@pytest.mark.usefixtures("process_group")
def test_wrappers_leave_state_dict_names_alone() -> None:
    model = build_model(ARGS, device="meta")
    names = set(model.state_dict())
    section = ParallelSection(activation_checkpoint=ActivationCheckpointSection(mode="full"))
    parallelize(
        model,
        section,
        build_mesh(ParallelDims(dp_replicate=1, dp_shard=1), "cpu"),
        mixed_precision_policy("fp32", torch.device("cpu")),
    )
    assert any("_checkpoint_wrapped_module" in name for name, _ in model.named_parameters())
    assert {plain_name(name) for name, _ in model.named_parameters()} == names


def test_every_n_blocks_and_recompute_fractions() -> None:
    every_3 = ActivationCheckpointSection(mode="every_n", every_n=3)
    assert checkpointed_blocks(every_3, 7) == [0, 3, 6]
    assert recomputed_fraction(every_3, 7) == pytest.approx(3 / 7)
    assert recomputed_fraction(ActivationCheckpointSection(mode="full"), 7) == 1.0
    assert recomputed_fraction(ActivationCheckpointSection(mode="selective"), 7) == 0.5  # every other matmul


def test_bf16_on_gpu_fp32_on_cpu() -> None:
    assert mixed_precision_policy("auto", torch.device("cpu")).param_dtype is None
    gpu = mixed_precision_policy("auto", torch.device("cuda", 0))
    assert (gpu.param_dtype, gpu.reduce_dtype) == (torch.bfloat16, torch.float32)
    assert mixed_precision_policy("bf16", torch.device("cpu")).param_dtype == torch.bfloat16


@pytest.mark.usefixtures("process_group")
@pytest.mark.parametrize("tied", [False, True], ids=["untied", "tied"])
def test_fsdp_groups_embedding_blocks_and_head_like_torchtitan(tied: bool) -> None:
    model = build_model(ARGS.replace(tie_embeddings=tied), device="meta")
    mesh = build_mesh(ParallelDims(dp_replicate=1, dp_shard=1), "cpu")
    parallelize(model, ParallelSection(), mesh, mixed_precision_policy("bf16", torch.device("cpu")))
    assert isinstance(model, FSDPModule) and all(isinstance(block, FSDPModule) for block in model.layers)
    if tied:  # the table is used first and last: it stays in the root group with the norm
        assert not isinstance(model.tok_embeddings, FSDPModule) and not isinstance(model.norm, FSDPModule)
    else:
        assert isinstance(model.tok_embeddings, FSDPModule)
        assert fully_shard.state(model.norm) is fully_shard.state(model.output)  # one group, one all-gather
        assert fully_shard.state(model.norm) is not fully_shard.state(model)


@pytest.mark.usefixtures("process_group")
def test_blocks_get_bf16_hidden_states_but_fp32_rotary_tables() -> None:
    model = build_model(ARGS, device="meta")
    mesh = build_mesh(ParallelDims(dp_replicate=1, dp_shard=1), "cpu")
    policy = mixed_precision_policy("bf16", torch.device("cpu"))
    assert policy.cast_forward_inputs is False
    parallelize(model, ParallelSection(), mesh, policy)
    model.to_empty(device="cpu")
    model.init_weights(seed=0)
    seen: list[tuple[torch.dtype, ...]] = []
    model.layers[0].register_forward_pre_hook(lambda module, args: seen.append(tuple(a.dtype for a in args)))
    model(torch.randint(0, ARGS.vocab_size, (1, 8)))
    assert seen == [(torch.bfloat16, torch.float32, torch.float32)]
