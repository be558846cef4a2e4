"""PEFT's own code is the oracle for our adapter format, transformers' for the merged checkpoint.

Tolerance: fp32 on CPU, atol 1e-5 on logits of magnitude ~0.4 (this tiny model's). The two implementations (ours,
transformers' Llama with PEFT's LoRA layers) gave bit-equal logits here (torch 2.13 CPU); the margin leaves room for
another summation order (another BLAS or thread count), never for a wrong key, scale or transpose (those move the
logits by > 1e-3, which the test also checks of the base alone).
"""

import json
from pathlib import Path

import pytest
import torch
from peft import LoraConfig, PeftModel
from safetensors.torch import load_file, save_file
from transformers import LlamaForCausalLM

from training.finetune.config import LoraSection
from training.finetune.lora import apply_lora, init_adapters, lora_modules
from training.finetune.peft_format import (
    ADAPTER_CONFIG,
    ADAPTER_WEIGHTS,
    adapter_tensors,
    base_state_dict,
    merged_state_dict,
    write_adapter,
)
from training.models.args import ModelArgs
from training.models.hf import hf_config, to_hf_state_dict
from training.models.transformer import build_model

ARGS = ModelArgs(flavor="llama", dim=32, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=64, vocab_size=96, max_seq_len=64)
SECTION = LoraSection(
    rank=4, alpha=12.0, dropout=0.1, target_modules=("q_proj", "v_proj", "o_proj", "up_proj", "down_proj")
)
ATOL = 1e-5


def _save_hf(state: dict[str, torch.Tensor], directory: Path) -> Path:
    directory.mkdir()
    save_file(
        {k: v.contiguous() for k, v in to_hf_state_dict(ARGS, state).items()}, str(directory / "model.safetensors")
    )
    (directory / "config.json").write_text(json.dumps(hf_config(ARGS)), encoding="utf-8")
    return directory


@pytest.fixture(scope="module")
def trained_lora() -> torch.nn.Module:
    """A LoRA model as after training: B no longer zero (random, so every adapter matters)."""
    model = build_model(ARGS, device="meta")
    apply_lora(model, ARGS, SECTION, torch.float32)
    model.to_empty(device="cpu")
    model.init_weights(seed=5)
    init_adapters(model, seed=5)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for _, module in lora_modules(model):
            module.lora_b.normal_(0.0, 0.2, generator=generator)
    return model.eval()


IDS = torch.randint(0, ARGS.vocab_size, (2, 24), generator=torch.Generator().manual_seed(2))


def test_peft_loads_our_adapter_onto_the_hf_base_with_our_logits(trained_lora: torch.nn.Module, tmp_path: Path) -> None:
    base = _save_hf(base_state_dict(trained_lora), tmp_path / "base")
    adapter = write_adapter(adapter_tensors(trained_lora, ARGS), SECTION, str(base), tmp_path / "adapter")
    assert sorted(p.name for p in adapter.iterdir()) == [ADAPTER_CONFIG, ADAPTER_WEIGHTS]
    assert "base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight" in load_file(adapter / ADAPTER_WEIGHTS)

    peft_model = PeftModel.from_pretrained(LlamaForCausalLM.from_pretrained(base), adapter).eval()
    loaded = peft_model.peft_config["default"]
    assert isinstance(loaded, LoraConfig) and (loaded.r, loaded.lora_alpha, loaded.lora_dropout) == (4, 12.0, 0.1)
    with torch.no_grad():
        theirs = peft_model(input_ids=IDS).logits
        ours = trained_lora(IDS)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=ATOL)
    # The adapters change the output: the comparison is not one of two base models.
    without = LlamaForCausalLM.from_pretrained(base).eval()
    with torch.no_grad():
        assert (without(input_ids=IDS).logits - theirs).abs().max() > 100 * ATOL


def test_transformers_loads_our_merged_checkpoint_equal_to_peft_merge_and_unload(
    trained_lora: torch.nn.Module, tmp_path: Path
) -> None:
    base = _save_hf(base_state_dict(trained_lora), tmp_path / "base")
    adapter = write_adapter(adapter_tensors(trained_lora, ARGS), SECTION, str(base), tmp_path / "adapter")
    merged_dir = _save_hf(merged_state_dict(trained_lora), tmp_path / "merged")

    peft_merged = PeftModel.from_pretrained(LlamaForCausalLM.from_pretrained(base), adapter).merge_and_unload().eval()
    ours_merged = LlamaForCausalLM.from_pretrained(merged_dir).eval()
    with torch.no_grad():
        expected = peft_merged(input_ids=IDS).logits
        torch.testing.assert_close(ours_merged(input_ids=IDS).logits, expected, rtol=0, atol=ATOL)
        torch.testing.assert_close(trained_lora(IDS), expected, rtol=0, atol=ATOL)
