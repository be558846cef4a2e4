import json
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from training.checkpoint.errors import CheckpointError
from training.checkpoint.hf_load import _read_rows, chunk_range, load_hf_weights
from training.models import ModelArgs
from training.models.hf import hf_rows_to_ours, to_hf_state_dict
from training.models.transformer import build_model

NEOX = ModelArgs(flavor="neox", dim=64, n_layers=2, n_heads=4, ffn_dim=96, vocab_size=70, rotary_pct=0.25)
LLAMA = ModelArgs(flavor="llama", dim=64, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=96, vocab_size=70)


def _source_model(args: ModelArgs) -> torch.nn.Module:
    torch.manual_seed(0)
    model = build_model(args, device="cpu")
    model.init_weights()
    return model


def _write_hf(args: ModelArgs, model: torch.nn.Module, directory: Path, files: int, dtype: torch.dtype) -> Path:
    tensors = {k: v.to(dtype).contiguous() for k, v in to_hf_state_dict(args, dict(model.state_dict())).items()}
    names = sorted(tensors)
    directory.mkdir()
    if files == 1:
        save_file(tensors, str(directory / "model.safetensors"))
        return directory
    weight_map = {}
    for index in range(files):
        file = f"model-{index + 1:05d}-of-{files:05d}.safetensors"
        part = names[index::files]
        save_file({name: tensors[name] for name in part}, str(directory / file))
        weight_map.update(dict.fromkeys(part, file))
    (directory / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return directory


def test_chunk_range_is_torch_chunk() -> None:
    for length in range(13):
        for parts in range(1, 6):
            chunks = torch.arange(length).chunk(parts) if length else ()
            for index in range(parts):
                offset, size = chunk_range(length, parts, index)
                expected = chunks[index].tolist() if index < len(chunks) else []
                assert list(range(offset, offset + size)) == expected, (length, parts, index)


@pytest.mark.parametrize(("args", "files"), [(LLAMA, 1), (NEOX, 3)], ids=["llama-one-file", "neox-three-shards"])
def test_loaded_model_gives_the_same_logits(args: ModelArgs, files: int, tmp_path: Path) -> None:
    source = _source_model(args)
    directory = _write_hf(args, source, tmp_path / "hf", files, torch.float32)
    target = build_model(args, device="meta").to_empty(device="cpu")
    assert load_hf_weights(target, args, directory) == len(list(target.parameters()))
    ids = torch.randint(0, args.vocab_size, (2, 12))
    torch.testing.assert_close(target(ids), source(ids), rtol=0, atol=0)


def test_bf16_checkpoints_load_into_fp32_parameters(tmp_path: Path) -> None:
    source = _source_model(LLAMA)
    directory = _write_hf(LLAMA, source, tmp_path / "hf", 2, torch.bfloat16)
    target = build_model(LLAMA, device="meta").to_empty(device="cpu")
    load_hf_weights(target, LLAMA, directory)
    assert target.tok_embeddings.weight.dtype == torch.float32
    assert torch.equal(target.tok_embeddings.weight, source.tok_embeddings.weight.to(torch.bfloat16).float())


def test_a_shard_of_permuted_qkv_rows_reads_whole_heads_and_slices_exactly(tmp_path: Path) -> None:
    name = "layers.0.attention.query_key_value.weight"
    hf_rows = torch.randn(3 * NEOX.dim, NEOX.dim)
    save_file({"qkv": hf_rows}, str(tmp_path / "qkv.safetensors"))
    expected = hf_rows_to_ours(NEOX, name, hf_rows)
    with safe_open(str(tmp_path / "qkv.safetensors"), framework="pt") as handle:
        for start, end in [(0, 192), (0, 96), (96, 192), (5, 50), (47, 49), (130, 131)]:
            assert torch.equal(_read_rows(handle, NEOX, name, "qkv", start, end), expected[start:end]), (start, end)


def test_missing_tensor_and_wrong_shape_are_named(tmp_path: Path) -> None:
    source = _source_model(LLAMA)
    directory = _write_hf(LLAMA, source, tmp_path / "hf", 1, torch.float32)
    wider = build_model(LLAMA.replace(vocab_size=80), device="meta").to_empty(device="cpu")
    with pytest.raises(
        CheckpointError, match=r"tensor 'model.embed_tokens.weight' has shape \[70, 64\], the model expects \[80, 64\]"
    ):
        load_hf_weights(wider, LLAMA.replace(vocab_size=80), directory)
    untied_neox = build_model(NEOX, device="meta").to_empty(device="cpu")
    with pytest.raises(
        CheckpointError, match=r"has no tensor 'gpt_neox.embed_in.weight' \(for tok_embeddings.weight\)"
    ):
        load_hf_weights(untied_neox, NEOX, directory)


def test_a_directory_without_weights_is_refused(tmp_path: Path) -> None:
    model = build_model(LLAMA, device="meta").to_empty(device="cpu")
    with pytest.raises(CheckpointError, match=r"holds no \*\.safetensors files"):
        load_hf_weights(model, LLAMA, tmp_path)
