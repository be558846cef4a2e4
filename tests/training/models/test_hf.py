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


LLAMA3_SCALED = LLAMA.replace(
    rope_theta=5e5, rope_type="llama3", rope_factor=32.0, rope_low_freq_factor=1.0, rope_high_freq_factor=4.0,
    rope_original_max_seq_len=8192, max_seq_len=131072,
)  # fmt: skip


@pytest.mark.parametrize(
    "args",
    [LLAMA, NEOX, LLAMA.replace(tie_embeddings=True, rope_theta=5e5), LLAMA3_SCALED, NEOX.replace(rotary_pct=0.5)],
    ids=["llama", "neox", "tied", "llama3-scaled", "neox-half-rotary"],
)
def test_config_json_round_trip(args: ModelArgs) -> None:
    assert args_from_hf_config(hf_config(args)) == args


def _transformers5(config: dict, rope_parameters: dict, *legacy: str) -> dict:
    """A config.json as transformers 5 writes it: rope settings only inside rope_parameters."""
    for key in ("rope_theta", "rope_scaling", "rotary_pct", "rotary_emb_base", *legacy):
        config.pop(key, None)
    return config | {"rope_parameters": rope_parameters}


def test_transformers5_llama_rope_parameters_are_read_with_llama3_scaling() -> None:
    """Llama 3.2 1B's config.json as transformers 5 writes it."""
    rope = {
        "rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 8192,
    }  # fmt: skip
    config = _transformers5(hf_config(LLAMA) | {"max_position_embeddings": 131072}, rope)
    assert args_from_hf_config(config) == LLAMA3_SCALED


def test_transformers5_neox_rope_parameters_give_theta_and_rotary_fraction() -> None:
    rope = {"rope_type": "default", "rope_theta": 50000.0, "partial_rotary_factor": 0.5}
    args = args_from_hf_config(_transformers5(hf_config(NEOX), rope))
    assert (args.rope_theta, args.rotary_pct, args.rope_type) == (50000.0, 0.5, "default")


def test_transformers4_llama3_rope_scaling_is_read() -> None:
    """Llama 3.1 8B's config.json (transformers 4.43+): top-level rope_theta, rope_scaling with rope_type."""
    scaling = {
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    }  # fmt: skip
    args = args_from_hf_config(hf_config(LLAMA) | {"rope_theta": 500000.0, "rope_scaling": scaling})
    assert (args.rope_type, args.rope_factor, args.rope_theta) == ("llama3", 8.0, 500000.0)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"rope_scaling": {"type": "yarn", "factor": 4.0}},
            "config.json rope_scaling.rope_type: 'yarn' is not supported (default or llama3)",
        ),
        (
            {"rope_parameters": {"rope_type": "dynamic", "rope_theta": 1e4, "factor": 2.0}},
            "config.json rope_parameters.rope_type: 'dynamic' is not supported (default or llama3)",
        ),
        (
            {"rope_parameters": {"rope_type": "linear", "rope_theta": 1e4, "factor": 2.0}},
            "config.json rope_parameters.rope_type: 'linear' is not supported (default or llama3)",
        ),
        (
            {"rope_parameters": {"rope_type": "llama3", "rope_theta": 1e4, "factor": 8.0}},
            "config.json rope_parameters.low_freq_factor: is required for rope_type 'llama3'",
        ),
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


@pytest.mark.parametrize(
    ("change", "field"), [({"attention_head_dim": 32}, "attention_head_dim"), ({"qk_norm": True}, "qk_norm"),
                          ({"qkv_bias": True}, "qkv_bias")],
)  # fmt: skip
def test_shapes_without_a_llama_export_are_refused_naming_the_field(change: dict, field: str) -> None:
    with pytest.raises(ModelArgsError, match=rf"model\.{field}: .* has no LlamaForCausalLM export"):
        hf_config(LLAMA.replace(**change))
