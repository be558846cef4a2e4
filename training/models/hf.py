"""Hugging Face naming: config.json <-> ModelArgs, and parameter names/layouts <-> ours, for every family.

Each family's adapter (training/models/<family>/hf.py, an HFAdapter named by its descriptor) says its names, its
row layouts and its config.json keys; the functions here find the adapter from `args.flavor` (or, reading a
config.json, from its model_type) so callers never branch on the family.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from training.models.args import ROPE_TYPES, ModelArgs, ModelArgsError
from training.models.families import FAMILIES, family_named
from training.models.family import ModelFamily, load

_LAYER_KEY = re.compile(r"^layers\.(\d+)\.(.+)$")


@dataclass(frozen=True)
class HFAdapter:
    """One family's Hugging Face state dict and config.json.

    top: our top-level parameter names -> HF's. layer_prefix: HF's prefix of block i ("model.layers").
    layer: our in-block names -> HF's; None: HF uses ours. row_order: for a parameter whose rows HF lays out
    otherwise, the order (HF -> ours) inside each whole-head block of rows; None for every other parameter.
    config: the family's config.json keys beside the shared ones. args_from_config: ModelArgs from a config.json
    of one of the family's hf_model_types, given the shared shape keys already read. experts: our in-block names
    of stacked expert weights ([n_experts, out, in], training/models/moe.py) -> HF's per-expert in-block name with
    an "{expert}" placeholder (HF checkpoints hold one tensor per expert).
    """

    top: Mapping[str, str]
    layer_prefix: str
    layer: Mapping[str, str] | None
    config: Callable[[ModelArgs], dict[str, Any]]
    args_from_config: Callable[[dict[str, Any], dict[str, Any]], ModelArgs]
    row_order: Callable[[ModelArgs, str], Tensor | None] = lambda args, name: None
    experts: Mapping[str, str] = dataclasses.field(default_factory=dict)


def adapter_of(family: ModelFamily) -> HFAdapter:
    adapter = load(family.hf_adapter)
    if not isinstance(adapter, HFAdapter):
        raise TypeError(f"model.flavor: {family.name!r} names {adapter!r} as its HF adapter, which is no HFAdapter")
    return adapter


def _adapter(args: ModelArgs) -> HFAdapter:
    return adapter_of(family_named(args.flavor))


def hf_name(args: ModelArgs, name: str) -> str:
    """Our parameter name -> the HF checkpoint's name (for stacked experts, the name pattern with "*" for the
    expert: hf_expert_names gives each)."""
    adapter = _adapter(args)
    if name in adapter.top:
        return adapter.top[name]
    match = _LAYER_KEY.match(name)
    if match is None:
        raise KeyError(f"parameter {name!r} has no Hugging Face name")
    index, rest = match.groups()
    if rest in adapter.experts:
        return f"{adapter.layer_prefix}.{index}.{adapter.experts[rest].format(expert='*')}"
    if adapter.layer is not None:
        if rest not in adapter.layer:
            raise KeyError(f"parameter {name!r} has no Hugging Face name")
        rest = adapter.layer[rest]
    return f"{adapter.layer_prefix}.{index}.{rest}"


def hf_expert_names(args: ModelArgs, name: str) -> list[str] | None:
    """The HF names of a stacked expert weight's slices, expert 0 first; None for any other parameter."""
    match = _LAYER_KEY.match(name)
    experts = _adapter(args).experts
    if match is None or match.group(2) not in experts:
        return None
    index, rest = match.groups()
    prefix = _adapter(args).layer_prefix
    return [f"{prefix}.{index}.{experts[rest].format(expert=j)}" for j in range(args.n_experts)]


def needs_row_permutation(args: ModelArgs, name: str) -> bool:
    return _adapter(args).row_order(args, name) is not None


def _permute_head_blocks(rows: Tensor, order: Tensor) -> Tensor:
    """rows: whole head blocks stacked along dim 0; apply `order` inside each block."""
    block = order.numel()
    shaped = rows.reshape(rows.shape[0] // block, block, *rows.shape[1:])
    return shaped[:, order].reshape(rows.shape)


def hf_rows_to_ours(args: ModelArgs, name: str, rows: Tensor) -> Tensor:
    order = _adapter(args).row_order(args, name)
    return rows if order is None else _permute_head_blocks(rows, order)


def our_rows_to_hf(args: ModelArgs, name: str, rows: Tensor) -> Tensor:
    order = _adapter(args).row_order(args, name)
    return rows if order is None else _permute_head_blocks(rows, torch.argsort(order))


def to_hf_state_dict(args: ModelArgs, state: dict[str, Tensor]) -> dict[str, Tensor]:
    hf_config(args)  # refuses, in one line, a shape the family's HF class cannot hold before renaming anything
    out: dict[str, Tensor] = {}
    for name, tensor in state.items():
        per_expert = hf_expert_names(args, name)
        if per_expert is None:
            out[hf_name(args, name)] = our_rows_to_hf(args, name, tensor)
        else:
            out.update(zip(per_expert, tensor.unbind(0), strict=True))
    return out


def from_hf_state_dict(args: ModelArgs, hf_state: dict[str, Tensor], names: list[str]) -> dict[str, Tensor]:
    out = {}
    for name in names:
        per_expert = hf_expert_names(args, name)
        if per_expert is None:
            out[name] = hf_rows_to_ours(args, name, hf_state[hf_name(args, name)])
        else:
            out[name] = torch.stack([hf_state[key] for key in per_expert])
    return out


_LLAMA3_KEYS = {
    "rope_factor": "factor",
    "rope_low_freq_factor": "low_freq_factor",
    "rope_high_freq_factor": "high_freq_factor",
    "rope_original_max_seq_len": "original_max_position_embeddings",
}


def rope_scaling(args: ModelArgs) -> dict[str, Any]:
    """The rope_scaling entry (transformers 4 form, which transformers 5 still reads) for a scaled model."""
    if args.rope_type == "default":
        return {}
    return {
        "rope_scaling": {"rope_type": args.rope_type, **{hf: getattr(args, ours) for ours, hf in _LLAMA3_KEYS.items()}}
    }


def rope_parameters(args: ModelArgs) -> dict[str, Any]:
    """The rotary settings as transformers 5 writes them: one `rope_parameters` mapping of the rope type, theta and
    the scaling keys (what rope_from_hf_config reads back)."""
    scaling = {key: value for key, value in rope_scaling(args).get("rope_scaling", {}).items() if key != "rope_type"}
    return {"rope_type": args.rope_type, "rope_theta": args.rope_theta, **scaling}


def refuse_unexported(args: ModelArgs, fields: tuple[str, ...], default: Any, target: str, why: str = "") -> None:
    """A shape field set (not `default`) that the family's HF class `target` cannot hold: one line naming it."""
    for field in fields:
        value = getattr(args, field)
        if value != default and value is not None:
            raise ModelArgsError(f"model.{field}: {value!r} has no {target} export" + (f" ({why})" if why else ""))


def hf_config(args: ModelArgs, torch_dtype: str = "float32") -> dict[str, Any]:
    common = {
        "hidden_size": args.dim,
        "intermediate_size": args.ffn_dim,
        "num_hidden_layers": args.n_layers,
        "num_attention_heads": args.n_heads,
        "vocab_size": args.vocab_size,
        "max_position_embeddings": args.max_seq_len,
        "tie_word_embeddings": args.tie_embeddings,
        "initializer_range": args.init_std,
        "torch_dtype": torch_dtype,
    }
    specific = _adapter(args).config(args)
    # The architecture keys lead, as transformers writes them.
    leading: dict[str, Any] = {key: specific.pop(key) for key in ("architectures", "model_type") if key in specific}
    return {**leading, **common, **specific}


def require(config: dict[str, Any], key: str, check: Callable[[Any], bool], message: str) -> None:
    if key in config and not check(config[key]):
        raise ModelArgsError(f"config.json {key}: {config[key]!r} {message}")


def rope_from_hf_config(config: dict[str, Any], theta_key: str, fraction_key: str, fraction: float) -> dict[str, Any]:
    """Rotary settings as ModelArgs fields, from transformers 5's `rope_parameters` (rope_type, rope_theta,
    partial_rotary_factor and the scaling keys in one mapping) or from the older top-level keys (`theta_key`,
    `fraction_key`, `rope_scaling`). Scaling other than llama3 is refused: the model would silently differ."""
    if config.get("rope_parameters") is not None:
        where, params = "rope_parameters", config["rope_parameters"]
        if not isinstance(params, dict) or any(isinstance(v, dict) for v in params.values()):
            raise ModelArgsError(f"config.json rope_parameters: {params!r} is not supported (one flat mapping)")
        theta = params.get("rope_theta", 10000.0)
        fraction = params.get("partial_rotary_factor", fraction)
    else:
        where, params = "rope_scaling", config.get("rope_scaling") or {}
        if not isinstance(params, dict):
            raise ModelArgsError(f"config.json rope_scaling: {params!r} is not supported (a mapping or null)")
        theta = config.get(theta_key, 10000.0)
        fraction = config.get(fraction_key, fraction)
    rope_type = params.get("rope_type", params.get("type", "default"))
    if rope_type not in ROPE_TYPES:
        raise ModelArgsError(
            f"config.json {where}.rope_type: {rope_type!r} is not supported ({' or '.join(ROPE_TYPES)})"
        )
    fields: dict[str, Any] = {"rope_theta": float(theta), "rotary_pct": float(fraction), "rope_type": rope_type}
    if rope_type == "llama3":
        for ours, theirs in _LLAMA3_KEYS.items():
            if theirs not in params:
                raise ModelArgsError(f"config.json {where}.{theirs}: is required for rope_type 'llama3'")
            fields[ours] = params[theirs]
    return fields


def args_from_hf_config(config: dict[str, Any]) -> ModelArgs:
    """ModelArgs for a config.json of a family's model_type (LlamaForCausalLM, GPTNeoXForCausalLM); rejects what
    we do not implement."""
    model_type = config.get("model_type")
    try:
        shape = {
            "dim": config["hidden_size"],
            "ffn_dim": config["intermediate_size"],
            "n_layers": config["num_hidden_layers"],
            "n_heads": config["num_attention_heads"],
            "vocab_size": config["vocab_size"],
            "max_seq_len": config.get("max_position_embeddings", 2048),
            "tie_embeddings": bool(config.get("tie_word_embeddings", False)),
        }
    except KeyError as missing:
        raise ModelArgsError(f"config.json {missing.args[0]}: is required but missing") from None
    for family in FAMILIES.values():
        if model_type in family.hf_model_types:
            return adapter_of(family).args_from_config(config, shape)
    known = " or ".join(t for family in FAMILIES.values() for t in family.hf_model_types)
    raise ModelArgsError(f"config.json model_type: {model_type!r} is not supported ({known})")
