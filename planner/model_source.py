"""Where `--model` gets its shape: a registry name or a Hugging Face config.json (a job YAML: planner.job_config).

The planner needs only the shape (hidden size, layers, heads, KV heads, head size, MLP width, vocabulary, tied
embeddings, maximum positions). Rotary scaling, norm epsilons and token ids change neither FLOPs nor memory, so a
config.json is read for the shape alone and those keys are not checked; what would make the plan wrong (an encoder,
biases, another MLP, sliding-window attention, experts of a layout we do not build) is refused with one line naming
the key and its value. Mixtral and Qwen3-MoE are read as mixtures of experts (the mixtral and qwen3 flavors:
total parameters for memory, active ones for FLOPs); other MoE spellings (DeepSeek's n_routed_experts with its
latent attention, DBRX's moe_num_experts) are refused.
No torch is imported: the head node runs the planner before queueing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from planner.job import PlanError
from spec.errors import not_utf8_text
from training.config import ConfigError, load_job_config
from training.models.args import ModelArgs, ModelArgsError

# Dense decoders the planner reads: a Llama block (RMSNorm, SwiGLU, rotary, optional GQA), with Qwen2's q/k/v
# biases and Qwen3's per-head q/k norms and decoupled head size. Each maps to what its transformers class builds.
DENSE_DECODERS: tuple[str, ...] = ("llama", "mistral", "qwen2", "qwen3")
# Mixtures of experts the planner reads, by model_type: the flavor and the config key holding the expert count.
MOE_DECODERS: dict[str, tuple[str, str]] = {
    "mixtral": ("mixtral", "num_local_experts"),
    "qwen3_moe": ("qwen3", "num_experts"),
}
# Keys that make a config a mixture of experts, in the spellings of Mixtral, Qwen-MoE, DeepSeek and DBRX.
_EXPERT_KEYS: tuple[str, ...] = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
_REQUIRED: tuple[tuple[str, str], ...] = (
    ("hidden_size", "dim"),
    ("intermediate_size", "ffn_dim"),
    ("num_hidden_layers", "n_layers"),
    ("num_attention_heads", "n_heads"),
    ("vocab_size", "vocab_size"),
)
CONFIG_SUFFIXES: tuple[str, ...] = (".json",)
JOB_SUFFIXES: tuple[str, ...] = (".yaml", ".yml")


class ModelConfigError(PlanError):
    """A config.json the planner cannot model: one line with the file, the key and its value."""

    def __init__(self, path: str, key: str, value: Any, problem: str) -> None:
        super().__init__("--model", path, f"{key}: {value!r} {problem}")
        self.key = key


def args_from_config_json(config: Mapping[str, Any], path: str = "config.json") -> ModelArgs:
    """The planner's ModelArgs for a dense decoder's or a Mixtral / Qwen3-MoE Hugging Face config.json (parsed)."""
    _refuse_what_is_not_a_dense_decoder(config, path)
    model_type = config.get("model_type")
    shape: dict[str, Any] = {}
    for key, field in _REQUIRED:
        if key not in config:
            raise ModelConfigError(path, key, None, "is required for a dense decoder and missing")
        shape[field] = config[key]
    head_dim = config.get("head_dim")
    heads = shape["n_heads"]
    if head_dim is not None and isinstance(heads, int) and heads > 0 and head_dim * heads == shape["dim"]:
        head_dim = None  # the usual hidden_size / heads, spelled out (Llama 3.2, Qwen3-8B)
    # A dense Qwen3 is the qwen3 family's (its q/k norms), so the backends that refuse that family are refused.
    dense_flavor = "qwen3" if model_type == "qwen3" else "llama"
    flavor, experts = (dense_flavor, {}) if model_type not in MOE_DECODERS else _experts(config, path)
    try:
        return ModelArgs(
            flavor=flavor,
            **shape,
            **experts,
            n_kv_heads=config.get("num_key_value_heads"),
            norm_eps=float(config.get("rms_norm_eps", 1e-6)),
            max_seq_len=int(config.get("max_position_embeddings", 2048)),
            tie_embeddings=bool(config.get("tie_word_embeddings", False)),
            attention_head_dim=head_dim,
            qk_norm=model_type in ("qwen3", "qwen3_moe"),
            qkv_bias=config.get("model_type") == "qwen2",  # transformers' Qwen2 always has them; no config key
        )
    except ModelArgsError as error:
        raise PlanError("--model", path, f"gives an invalid shape: {error}") from None


def _refuse_what_is_not_a_dense_decoder(config: Mapping[str, Any], path: str) -> None:
    if config.get("is_encoder_decoder"):
        raise ModelConfigError(path, "is_encoder_decoder", config["is_encoder_decoder"], "is not a decoder-only model")
    architectures = config.get("architectures")
    if architectures is not None and not (
        isinstance(architectures, list) and all(str(name).endswith("ForCausalLM") for name in architectures)
    ):
        raise ModelConfigError(path, "architectures", architectures, "is not a causal (decoder-only) language model")
    model_type = config.get("model_type")
    expert_key = MOE_DECODERS[model_type][1] if model_type in MOE_DECODERS else None
    for key in _EXPERT_KEYS:
        if config.get(key) and key != expert_key:
            raise ModelConfigError(
                path,
                key,
                config[key],
                f"makes it a mixture of experts of a kind not modelled ({', '.join(MOE_DECODERS)})",
            )
    if model_type not in DENSE_DECODERS and model_type not in MOE_DECODERS:
        known = ", ".join((*DENSE_DECODERS, *MOE_DECODERS))
        raise ModelConfigError(path, "model_type", model_type, f"is not one of {known}")
    for key in ("attention_bias", "mlp_bias"):
        if config.get(key):
            raise ModelConfigError(path, key, config[key], "is not modelled (bias-free blocks only)")
    act = config.get("hidden_act", "silu")
    if act != "silu":
        raise ModelConfigError(path, "hidden_act", act, "is not modelled (SwiGLU with silu only)")
    if config.get("use_sliding_window") or (model_type in ("mistral", "mixtral") and config.get("sliding_window")):
        key = "use_sliding_window" if config.get("use_sliding_window") else "sliding_window"
        raise ModelConfigError(path, key, config[key], "is not modelled (full causal attention only)")


def _experts(config: Mapping[str, Any], path: str) -> tuple[str, dict[str, Any]]:
    """(flavor, the MoE fields of ModelArgs) of a Mixtral or Qwen3-MoE config.json."""
    flavor, count_key = MOE_DECODERS[config["model_type"]]
    if config["model_type"] == "qwen3_moe":
        if config.get("decoder_sparse_step", 1) != 1:
            raise ModelConfigError(
                path, "decoder_sparse_step", config["decoder_sparse_step"], "is not modelled (1 only)"
            )
        if config.get("mlp_only_layers"):
            raise ModelConfigError(
                path, "mlp_only_layers", config["mlp_only_layers"], "is not modelled (every layer MoE)"
            )
    for key in (count_key, "num_experts_per_tok"):
        if key not in config:
            raise ModelConfigError(path, key, None, "is required for a mixture of experts and missing")
    experts = {"n_experts": config[count_key], "experts_per_token": config["num_experts_per_tok"]}
    if "moe_intermediate_size" in config:
        experts["expert_ffn_dim"] = config["moe_intermediate_size"]
    return flavor, experts


def read_config_json(path: Path) -> ModelArgs:
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise PlanError("--model", str(path), f"cannot be read: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise PlanError("--model", str(path), not_utf8_text(error)) from None
    except RecursionError:
        raise PlanError("--model", str(path), "nests too deeply to be a config.json") from None
    except json.JSONDecodeError as error:
        raise PlanError("--model", str(path), f"is not JSON: {error.msg} at line {error.lineno}") from None
    if not isinstance(config, dict):
        raise PlanError("--model", str(path), "is not a JSON object")
    return args_from_config_json(config, str(path))


def is_job_yaml(value: str) -> bool:
    """--model names one of our job configs (planner.job_config reads it, with its batch and layout)."""
    path = Path(value)
    return path.suffix in JOB_SUFFIXES and path.is_file()


def resolve_model(value: str, known: Mapping[str, ModelArgs]) -> ModelArgs:
    """--model: a known name, else a path to a config.json or a directory holding one (a job YAML: is_job_yaml)."""
    if value in known:
        return known[value]
    path = Path(value)
    if path.suffix in CONFIG_SUFFIXES and path.is_file():
        return read_config_json(path)
    if path.is_dir() and (path / "config.json").is_file():
        return read_config_json(path / "config.json")
    raise PlanError(
        "--model",
        value,
        f"is neither a known model ({', '.join(known)}) nor a config.json, a directory holding one, or a job YAML",
    )


def dataset_vocab_size(prefix: str) -> int:
    """The vocabulary of a prepared dataset (PREFIX.manifest.json's vocab_size): what a job YAML's
    `vocab_size: data` reads, as llm-submit --data-prefix does."""
    path = Path(f"{prefix}.manifest.json")
    try:
        vocab = json.loads(path.read_text(encoding="utf-8")).get("vocab_size")
    except (OSError, ValueError, AttributeError):
        vocab = None
    if not isinstance(vocab, int) or isinstance(vocab, bool) or vocab < 1:
        raise PlanError("--data-prefix", prefix, f"has no readable manifest with a vocab_size ({path})")
    return vocab


def mixture_vocab_size(job_yaml: str) -> int | None:
    """The vocabulary of a job YAML's mixture (data.datasets), read from every dataset's manifest; None when the
    YAML names one data.prefix (llm-submit's --data-prefix replaces it) or a manifest is not here (planning away from
    the data). Datasets of different vocabularies are refused, as llm-submit and the trainer refuse them."""
    try:
        datasets = load_job_config(job_yaml).data.datasets
    except ConfigError:
        return None  # read_job names the problem
    if datasets is None or not all(Path(f"{d.prefix}.manifest.json").is_file() for d in datasets):
        return None
    sizes = [dataset_vocab_size(dataset.prefix) for dataset in datasets]
    for position, size in enumerate(sizes):
        if size != sizes[0]:
            raise PlanError(
                f"data.datasets[{position}].prefix",
                datasets[position].prefix,
                f"has vocab_size {size}, data.datasets[0] has {sizes[0]}; a mixture trains one vocabulary",
            )
    return sizes[0]
