import math
import re

import pytest
import torch
import torch.nn.functional as F

from training.models import ModelArgs, ModelArgsError
from training.models.hf import args_from_hf_config, from_hf_state_dict, hf_config, to_hf_state_dict
from training.models.transformer import build_model

NEOX = ModelArgs(flavor="neox", dim=64, n_layers=2, n_heads=4, ffn_dim=128, vocab_size=101, rotary_pct=0.25)
LLAMA = ModelArgs(flavor="llama", dim=64, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=96, vocab_size=101)


def _trained_like(args: ModelArgs) -> torch.nn.Module:
    torch.manual_seed(0)
    model = build_model(args, device="cpu").double()
    model.init_weights()
    with torch.no_grad():  # biases and norms away from their init so a mis-mapping shows
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return model


def _hf_rotate_first_dims(x: torch.Tensor, rotary_dim: int, theta: float) -> torch.Tensor:
    """GPT-NeoX as published: rotate-half on the first rotary_dim dims, the rest concatenated unchanged."""
    rot, rest = x[..., :rotary_dim], x[..., rotary_dim:]
    inv = 1.0 / theta ** (torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim)
    angles = torch.outer(torch.arange(x.shape[-2], dtype=torch.float64), inv)
    cos, sin = torch.cat([angles, angles], -1).cos(), torch.cat([angles, angles], -1).sin()
    half = rotary_dim // 2
    rotated = rot * cos + torch.cat([-rot[..., half:], rot[..., :half]], -1) * sin
    return torch.cat([rotated, rest], -1)


def _reference_neox_logits(hf: dict[str, torch.Tensor], args: ModelArgs, ids: torch.Tensor) -> torch.Tensor:
    batch, seq = ids.shape
    heads, hd = args.n_heads, args.head_dim
    mask = torch.full((seq, seq), float("-inf"), dtype=torch.float64).triu(1)
    h = hf["gpt_neox.embed_in.weight"][ids]
    for i in range(args.n_layers):
        p = f"gpt_neox.layers.{i}."

        def ln(x: torch.Tensor, name: str, p: str = p) -> torch.Tensor:
            return F.layer_norm(x, (args.dim,), hf[p + name + ".weight"], hf[p + name + ".bias"], args.norm_eps)

        qkv = F.linear(
            ln(h, "input_layernorm"),
            hf[p + "attention.query_key_value.weight"],
            hf[p + "attention.query_key_value.bias"],
        )
        qkv = qkv.view(batch, seq, heads, 3 * hd).transpose(1, 2)
        q = _hf_rotate_first_dims(qkv[..., :hd], args.rotary_dim, args.rope_theta)
        k = _hf_rotate_first_dims(qkv[..., hd : 2 * hd], args.rotary_dim, args.rope_theta)
        weights = torch.softmax(q @ k.mT / math.sqrt(hd) + mask, dim=-1)
        attn = (weights @ qkv[..., 2 * hd :]).transpose(1, 2).reshape(batch, seq, args.dim)
        attn = F.linear(attn, hf[p + "attention.dense.weight"], hf[p + "attention.dense.bias"])
        up = F.linear(
            ln(h, "post_attention_layernorm"), hf[p + "mlp.dense_h_to_4h.weight"], hf[p + "mlp.dense_h_to_4h.bias"]
        )
        mlp = F.linear(F.gelu(up), hf[p + "mlp.dense_4h_to_h.weight"], hf[p + "mlp.dense_4h_to_h.bias"])
        h = h + attn + mlp
    h = F.layer_norm(
        h, (args.dim,), hf["gpt_neox.final_layer_norm.weight"], hf["gpt_neox.final_layer_norm.bias"], args.norm_eps
    )
    return h @ hf["embed_out.weight"].T


def test_neox_export_matches_a_concatenation_form_reference() -> None:
    model = _trained_like(NEOX)
    hf = to_hf_state_dict(NEOX, dict(model.state_dict()))
    ids = torch.randint(0, NEOX.vocab_size, (2, 10))
    torch.testing.assert_close(model(ids), _reference_neox_logits(hf, NEOX, ids), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("args", [LLAMA, NEOX, LLAMA.replace(tie_embeddings=True)], ids=["llama", "neox", "tied"])
def test_state_dict_round_trip_through_hf_names(args: ModelArgs) -> None:
    model = _trained_like(args)
    ours = dict(model.state_dict())
    back = from_hf_state_dict(args, to_hf_state_dict(args, ours), list(ours))
    assert back.keys() == ours.keys()
    for name in ours:
        assert torch.equal(back[name], ours[name]), name


def test_llama_names_are_the_transformers_ones() -> None:
    hf = to_hf_state_dict(LLAMA, dict(_trained_like(LLAMA).state_dict()))
    assert "model.layers.1.self_attn.k_proj.weight" in hf
    assert hf["model.layers.1.self_attn.k_proj.weight"].shape == (32, 64)
    assert {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"} <= hf.keys()


@pytest.mark.parametrize("args", [LLAMA, NEOX, LLAMA.replace(tie_embeddings=True, rope_theta=5e5)])
def test_config_json_round_trip(args: ModelArgs) -> None:
    assert args_from_hf_config(hf_config(args)) == args


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"rope_scaling": {"type": "llama3"}}, "config.json rope_scaling: {'type': 'llama3'} is not supported"),
        ({"model_type": "mistral"}, "config.json model_type: 'mistral' is not supported"),
        ({"hidden_act": "gelu"}, "config.json hidden_act: 'gelu' is not supported"),
    ],
)
def test_unsupported_hf_configs_are_refused_by_field(change: dict, message: str) -> None:
    config = hf_config(LLAMA) | change
    with pytest.raises(ModelArgsError, match=re.escape(message)):
        args_from_hf_config(config)


def test_missing_field_is_named() -> None:
    config = hf_config(LLAMA)
    del config["hidden_size"]
    with pytest.raises(ModelArgsError, match=re.escape("config.json hidden_size: is required but missing")):
        args_from_hf_config(config)
