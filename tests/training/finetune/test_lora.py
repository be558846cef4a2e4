"""The LoRA converter on a plain model: what it wraps, what it freezes, how it starts, what reaches the optimizer."""

import pytest
import torch

from training.config import ConfigError, OptimSection
from training.finetune.config import LoraSection
from training.finetune.lora import LoRALinear, apply_lora, base_parameters, init_adapters, lora_modules
from training.models.args import ModelArgs
from training.models.transformer import build_model
from training.optim import build_optimizer

ARGS = ModelArgs(flavor="llama", dim=32, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=64, vocab_size=96, max_seq_len=32)


def _model(section: LoraSection | None, frozen: torch.dtype = torch.float32) -> torch.nn.Module:
    model = build_model(ARGS, device="meta")
    if section is not None:
        apply_lora(model, ARGS, section, frozen)
    model.to_empty(device="cpu")
    model.init_weights(seed=3)
    if section is not None:
        init_adapters(model, seed=3)
    return model


def test_every_target_of_every_block_is_wrapped_and_only_adapters_train() -> None:
    model = _model(LoraSection(rank=4, target_modules=("q_proj", "down_proj")))
    wrapped = sorted(name for name, _ in lora_modules(model))
    assert wrapped == [
        "layers.0.attention.wq",
        "layers.0.feed_forward.w2",
        "layers.1.attention.wq",
        "layers.1.feed_forward.w2",
    ]
    trainable = sorted(name for name, p in model.named_parameters() if p.requires_grad)
    assert trainable == sorted(f"{module}.{ab}" for module in wrapped for ab in ("lora_a", "lora_b"))
    optimizer = build_optimizer(model, OptimSection(fused=False), torch.device("cpu"))
    in_optimizer = {id(p) for group in optimizer.param_groups for p in group["params"]}
    assert in_optimizer == {id(p) for p in model.parameters() if p.requires_grad}
    # The base keeps its names: a start checkpoint (HF or ours) loads into them as into the unconverted model.
    assert [name for name, _ in base_parameters(model)] == [name for name, _ in _model(None).named_parameters()]


def test_the_converted_model_starts_equal_to_the_base_and_b_is_zero() -> None:
    lora, plain = _model(LoraSection(rank=4)), _model(None)
    plain.load_state_dict({name: p for name, p in base_parameters(lora)})
    ids = torch.randint(0, ARGS.vocab_size, (2, 16), generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(lora(ids), plain(ids), rtol=0, atol=0)
    for _, module in lora_modules(lora):
        assert not module.lora_b.any() and module.lora_a.abs().max() <= 1 / module.in_features**0.5
        assert module.lora_a.std() > 0


def test_frozen_base_is_bf16_and_adapters_fp32_masters() -> None:
    model = _model(LoraSection(rank=2), frozen=torch.bfloat16)
    dtypes = {name: p.dtype for name, p in model.named_parameters()}
    assert {d for n, d in dtypes.items() if "lora_" in n} == {torch.float32}
    assert {d for n, d in dtypes.items() if "lora_" not in n} == {torch.bfloat16}
    ids = torch.randint(0, ARGS.vocab_size, (1, 8))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        model(ids, labels=ids).backward()
    assert all(p.grad is None for _, p in base_parameters(model))
    assert all(m.lora_b.grad is not None and m.lora_b.grad.dtype == torch.float32 for _, m in lora_modules(model))


def test_the_update_is_scaled_by_alpha_over_rank() -> None:
    base = torch.nn.Linear(8, 6, bias=False)
    module = LoRALinear(base, rank=2, alpha=8.0, dropout=0.0)
    with torch.no_grad():
        module.lora_a.copy_(torch.randn(2, 8))
        module.lora_b.copy_(torch.randn(6, 2))
    x = torch.randn(3, 8)
    expected = x @ base.weight.T + 4.0 * (x @ module.lora_a.T @ module.lora_b.T)
    torch.testing.assert_close(module(x), expected)
    torch.testing.assert_close(x @ module.merged_weight().T, expected)


def test_a_target_that_names_no_module_is_one_line_listing_the_names() -> None:
    # The config refuses such a name first (tests/training/finetune/test_config.py); the converter keeps its own
    # check for a section built around that validation
    with pytest.raises(ConfigError) as error:
        _model(LoraSection.model_construct(rank=16, alpha=32.0, dropout=0.0, target_modules=("q_proj", "qkv_proj")))
    assert error.value.lines == [
        "config: finetune.lora.target_modules: 'qkv_proj' names no module of the model; its linear layers are "
        "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj"
    ]


def test_neox_is_refused_in_one_line() -> None:
    neox = ARGS.replace(flavor="neox", n_kv_heads=None)
    with pytest.raises(
        ConfigError, match=r"finetune.mode: 'lora' supports Llama-shaped models, not model.flavor 'neox'"
    ):
        apply_lora(build_model(neox, device="meta"), neox, LoraSection(), torch.float32)
