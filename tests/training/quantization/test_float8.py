"""FP8 training (training/quantization/float8.py) on CPUs through torchao's emulation: what is converted, the
numerics against fp32, the refusal without FP8 tensor cores, and exact resume under FSDP2 on 2 gloo ranks."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from tests.training.jobs import (
    kill_training,
    losses_by_step,
    records,
    run_training,
    start_training,
    tiny_job,
    wait_for_step,
    write_job,
)
from training.config import ConfigError
from training.models.registry import get_model_args
from training.models.transformer import Transformer, build_model
from training.quantization.config import Float8Section
from training.quantization.float8 import apply_float8

CPU = torch.device("cpu")
BLOCK_LINEARS = ("attention.wq", "attention.wk", "attention.wv", "attention.wo", "feed_forward.w1",
                 "feed_forward.w2", "feed_forward.w3")  # fmt: skip


def _tiny(**changes: object) -> Transformer:
    shape: dict[str, object] = {"vocab_size": 256, "n_layers": 2, "dim": 64, "n_heads": 4, "ffn_dim": 192, **changes}
    args = get_model_args("tiny").replace(**shape)
    return build_model(args, device="meta")


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise", "mxfp8"])
def test_the_blocks_linear_layers_are_converted_and_the_state_dict_keeps_its_names(recipe: str) -> None:
    plain, model = _tiny(tie_embeddings=False), _tiny(tie_embeddings=False)
    done = apply_float8(model, Float8Section(recipe=recipe, emulate=True), CPU, sharded=False)  # type: ignore[arg-type]
    assert done is not None
    assert sorted(done.converted) == sorted(f"{block}.{name}" for block in (0, 1) for name in BLOCK_LINEARS)
    assert done.kept == () and not done.precompute_scales  # one rank: nothing sharded, nothing gathered
    assert list(model.state_dict()) == list(plain.state_dict())
    assert type(model.output).__name__ == "OutputHead"  # the head stays in the mixed-precision dtype


def test_shapes_the_kernels_cannot_take_stay_in_high_precision() -> None:
    model = _tiny(ffn_dim=200)  # not a multiple of 16: the MLP's three linears stay
    done = apply_float8(model, Float8Section(recipe="tensorwise", emulate=True), CPU, sharded=True)
    assert done is not None and done.precompute_scales  # sharded tensorwise: FP8 all-gather, scales per step
    assert {name.split(".", 1)[1] for name in done.kept} == {"feed_forward.w1", "feed_forward.w2", "feed_forward.w3"}
    assert {name.split(".", 1)[1] for name in done.converted} == {f"attention.w{x}" for x in "qkvo"}


def test_without_fp8_tensor_cores_the_recipe_is_refused_before_any_weight_exists() -> None:
    model = _tiny()
    with pytest.raises(
        ConfigError, match=r"float8\.recipe: 'tensorwise' needs FP8 tensor cores .* this job runs on a CPU"
    ):
        apply_float8(model, Float8Section(recipe="tensorwise"), CPU, sharded=False)
    linears = [m for m in model.get_submodule("layers").modules() if isinstance(m, torch.nn.Linear)]
    assert linears and all(type(m).__name__ == "Linear" for m in linears)


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise", "mxfp8"])
def test_emulated_fp8_loss_and_gradients_stay_near_fp32(recipe: str) -> None:
    torch.manual_seed(0)
    reference = _tiny()
    reference.to_empty(device=CPU)
    reference.init_weights(seed=1)
    model = copy.deepcopy(reference)
    apply_float8(model, Float8Section(recipe=recipe, emulate=True), CPU, sharded=False)  # type: ignore[arg-type]
    tokens = torch.randint(0, 256, (4, 65))
    losses = []
    for each in (reference, model):
        loss = each(tokens[:, :-1], labels=tokens[:, 1:]) / tokens[:, 1:].numel()
        loss.backward()
        losses.append(loss.item())
    assert losses[1] == pytest.approx(losses[0], rel=2e-3)
    w2 = "layers.0.feed_forward.w2.weight"
    grad, fp8_grad = reference.get_parameter(w2).grad, model.get_parameter(w2).grad
    assert fp8_grad is not None and grad is not None
    cosine = torch.nn.functional.cosine_similarity(grad.flatten(), torch.as_tensor(fp8_grad).flatten(), dim=0)
    assert cosine > 0.99 and not torch.equal(grad, torch.as_tensor(fp8_grad))  # FP8 rounding, not a copy


STEPS = 12


@pytest.mark.distributed
@pytest.mark.parametrize("recipe", ["tensorwise", "mxfp8"])
def test_a_sigkilled_fp8_run_resumes_with_the_losses_of_an_uninterrupted_one(
    recipe: str, demo_data_prefix: str, tmp_path: Path
) -> None:
    """Dynamic scaling keeps no history: the resumed run computes what the uninterrupted one did, bit for bit, with
    tensorwise's FP8 all-gather under FSDP2 and MXFP8's wrapped weights saved and loaded through DCP."""
    job = tiny_job(demo_data_prefix, train={"max_steps": STEPS}, float8={"recipe": recipe, "emulate": True})
    config = write_job(tmp_path / "job.yaml", job)
    reference = run_training(config, tmp_path / "reference", ranks=2)
    assert reference.returncode == 0, reference.stdout[-2000:] + reference.stderr[-2000:]
    fp32 = write_job(tmp_path / "fp32.yaml", tiny_job(demo_data_prefix, train={"max_steps": STEPS}))
    assert run_training(fp32, tmp_path / "fp32", ranks=2).returncode == 0
    expected, fp32_losses = losses_by_step(tmp_path / "reference"), losses_by_step(tmp_path / "fp32")
    assert sorted(expected) == list(range(1, STEPS + 1))
    assert all(abs(expected[s] - fp32_losses[s]) < 5e-3 * fp32_losses[s] for s in expected), (expected, fp32_losses)

    run_dir = tmp_path / "killed"
    process = start_training(config, run_dir, ranks=2)
    try:
        wait_for_step(run_dir, 6, process)
    finally:
        kill_training(process)
    resumed = run_training(config, run_dir, ranks=2)
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    (resume,) = [r for r in records(run_dir, "event") if r["event"] == "resume"]
    after = losses_by_step(run_dir, after=resume["step"])
    assert resume["step"] >= 4 and sorted(after) == list(range(resume["step"] + 1, STEPS + 1))
    assert all(after[step] == expected[step] for step in after), (after, expected)


@pytest.mark.distributed
def test_a_bf16_checkpoint_resumes_under_fp8_with_the_same_weights(demo_data_prefix: str, tmp_path: Path) -> None:
    """The converted layers keep their parameter names: a run can turn FP8 on across a restart."""
    run_dir = tmp_path / "run"
    first = write_job(tmp_path / "a.yaml", tiny_job(demo_data_prefix, train={"max_steps": 4}, optim={"decay_steps": 8}))
    assert run_training(first, run_dir, ranks=2).returncode == 0
    job = tiny_job(demo_data_prefix, train={"max_steps": 8}, optim={"decay_steps": 8},
                   float8={"recipe": "tensorwise", "emulate": True})  # fmt: skip
    result = run_training(write_job(tmp_path / "b.yaml", job), run_dir, ranks=2)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    (resume,) = [r for r in records(run_dir, "event") if r["event"] == "resume"]
    assert resume["step"] == 4 and sorted(losses_by_step(run_dir, after=4)) == [5, 6, 7, 8]
