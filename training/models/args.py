"""The shape of a decoder-only transformer, validated on construction. Imports no torch."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from spec.errors import UserError
from training.models.families import FAMILIES

# The user-facing name of a model family (training/models/families.py), in ModelArgs and job YAMLs.
Flavor = str
FLAVORS: tuple[str, ...] = tuple(FAMILIES)
RopeType = Literal["default", "llama3"]
ROPE_TYPES: tuple[str, ...] = ("default", "llama3")
RouterScore = Literal["softmax", "sigmoid"]
ROUTER_SCORES: tuple[str, ...] = ("softmax", "sigmoid")


class ModelArgsError(UserError):
    """A model shape that cannot be built; the message names the field and the value."""


@dataclass(frozen=True)
class ModelArgs:
    """Transformer shape.

    flavor names the family (training/models/families.py), whose descriptor says what its block is and which
    fields it refuses: llama (RMSNorm, SwiGLU, GQA, Qwen options), neox (LayerNorm, GELU, parallel residual,
    rotary on `rotary_pct` of each head, the rest getting zero frequencies, see rope.py).
    rope_type "llama3": Llama 3.1+ frequency scaling (rope.py) with the rope_factor / rope_*_freq_factor /
    rope_original_max_seq_len fields; "default" ignores them.
    """

    flavor: Flavor
    dim: int
    n_layers: int
    n_heads: int
    ffn_dim: int
    vocab_size: int
    n_kv_heads: int | None = None
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    rotary_pct: float = 1.0
    max_seq_len: int = 2048
    tie_embeddings: bool = False
    init_std: float = 0.02
    rope_type: RopeType = "default"
    rope_factor: float = 8.0
    rope_low_freq_factor: float = 1.0
    rope_high_freq_factor: float = 4.0
    rope_original_max_seq_len: int = 8192
    # Set where a config decouples the head size from dim / n_heads (Qwen3, Mistral NeMo): q/k/v project to
    # n_heads x attention_head_dim and wo back to dim. None: dim // n_heads.
    attention_head_dim: int | None = None
    qk_norm: bool = False  # RMSNorm over each head's q and k before rotary (Qwen3)
    qkv_bias: bool = False  # biases on the q, k and v projections, none on the output (Qwen2 / Qwen2.5)
    # Mixture of experts (training/models/moe.py); n_experts 0 is a dense model and the fields below are unused.
    n_experts: int = 0  # routed experts per MoE layer
    experts_per_token: int = 0  # top-k
    expert_ffn_dim: int | None = None  # each expert's SwiGLU width; None: ffn_dim (Mixtral)
    n_shared_experts: int = 0  # experts every token passes through, one SwiGLU of n x expert_ffn_dim (DeepSeek)
    router_score: RouterScore = "softmax"  # softmax (Mixtral, Qwen3-MoE) or sigmoid (DeepSeek-V3) affinities
    norm_topk_prob: bool = True  # renormalise the top-k weights to sum to 1 (Qwen3-MoE's norm_topk_prob)
    route_scale: float = 1.0  # multiplies the routed output (DeepSeek-V3's routed_scaling_factor)
    router_aux_loss_coef: float = 0.0  # the load-balancing loss's weight in the loss (transformers' semantics)
    router_bias_update_rate: float = 0.0  # aux-loss-free balancing: per-step bias update (DeepSeek-V3); 0 is off

    def __post_init__(self) -> None:
        problems = self.problems()
        if problems:
            raise ModelArgsError(problems[0])

    def problems(self) -> list[str]:
        out: list[str] = []
        if self.flavor not in FLAVORS:
            out.append(f"model.flavor: {self.flavor!r} is not one of {', '.join(FLAVORS)}")
        for name in ("dim", "n_layers", "n_heads", "ffn_dim", "vocab_size", "max_seq_len"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                out.append(f"model.{name}: {value!r} must be a positive integer")
        if out:
            return out
        explicit = self.attention_head_dim
        if explicit is not None and (not isinstance(explicit, int) or isinstance(explicit, bool) or explicit < 1):
            out.append(f"model.attention_head_dim: {explicit!r} must be a positive integer or null")
        elif explicit is None and self.dim % self.n_heads:
            out.append(f"model.dim: {self.dim} is not divisible by model.n_heads ({self.n_heads})")
        elif self.head_dim % 2:
            out.append(f"model.n_heads: {self.n_heads} gives an odd head size {self.head_dim}; rotary needs it even")
        kv = self.kv_heads
        if kv < 1 or self.n_heads % kv:
            out.append(f"model.n_kv_heads: {self.n_kv_heads!r} must divide model.n_heads ({self.n_heads})")
        if not 0.0 < self.rotary_pct <= 1.0:
            out.append(f"model.rotary_pct: {self.rotary_pct!r} must be in (0, 1]")
        elif out == [] and self.rotary_dim % 2:
            out.append(f"model.rotary_pct: {self.rotary_pct!r} rotates an odd number of dims ({self.rotary_dim})")
        out.extend(self._expert_problems())
        if self.flavor in FAMILIES:
            out.extend(FAMILIES[self.flavor].shape_problems(self))
        if self.norm_eps <= 0:
            out.append(f"model.norm_eps: {self.norm_eps!r} must be positive")
        if self.rope_theta <= 0:
            out.append(f"model.rope_theta: {self.rope_theta!r} must be positive")
        if self.rope_type not in ROPE_TYPES:
            out.append(f"model.rope_type: {self.rope_type!r} is not one of {', '.join(ROPE_TYPES)}")
        elif self.rope_type == "llama3":
            out.extend(self._llama3_problems())
        return out

    def _llama3_problems(self) -> list[str]:
        out = []
        if not self.rope_factor >= 1.0:
            out.append(f"model.rope_factor: {self.rope_factor!r} must be >= 1")
        if not 0 < self.rope_low_freq_factor < self.rope_high_freq_factor:
            out.append(
                f"model.rope_low_freq_factor: {self.rope_low_freq_factor!r} must be positive and below "
                f"model.rope_high_freq_factor ({self.rope_high_freq_factor!r})"
            )
        if not isinstance(self.rope_original_max_seq_len, int) or self.rope_original_max_seq_len < 1:
            out.append(
                f"model.rope_original_max_seq_len: {self.rope_original_max_seq_len!r} must be a positive integer"
            )
        return out

    def _expert_problems(self) -> list[str]:
        if not isinstance(self.n_experts, int) or isinstance(self.n_experts, bool) or self.n_experts < 0:
            return [f"model.n_experts: {self.n_experts!r} must be a non-negative integer (0: dense)"]
        if self.n_experts == 0:
            return []
        out = []
        if not isinstance(self.experts_per_token, int) or not 1 <= self.experts_per_token <= self.n_experts:
            out.append(
                f"model.experts_per_token: {self.experts_per_token!r} must be between 1 and "
                f"model.n_experts ({self.n_experts})"
            )
        width = self.expert_ffn_dim
        if width is not None and (not isinstance(width, int) or isinstance(width, bool) or width < 1):
            out.append(f"model.expert_ffn_dim: {width!r} must be a positive integer or null")
        if not isinstance(self.n_shared_experts, int) or self.n_shared_experts < 0:
            out.append(f"model.n_shared_experts: {self.n_shared_experts!r} must be a non-negative integer")
        if self.router_score not in ROUTER_SCORES:
            out.append(f"model.router_score: {self.router_score!r} is not one of {', '.join(ROUTER_SCORES)}")
        for name in ("router_aux_loss_coef", "router_bias_update_rate"):
            if not getattr(self, name) >= 0:
                out.append(f"model.{name}: {getattr(self, name)!r} must be >= 0")
        if not self.route_scale > 0:
            out.append(f"model.route_scale: {self.route_scale!r} must be positive")
        return out

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 0

    @property
    def expert_width(self) -> int:
        """Each routed expert's SwiGLU width."""
        return self.ffn_dim if self.expert_ffn_dim is None else self.expert_ffn_dim

    @property
    def head_dim(self) -> int:
        return self.attention_head_dim if self.attention_head_dim is not None else self.dim // self.n_heads

    @property
    def attention_dim(self) -> int:
        """Width of the concatenated heads (n_heads x head_dim): dim unless attention_head_dim decouples them."""
        return self.n_heads * self.head_dim

    @property
    def kv_heads(self) -> int:
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def rotary_dim(self) -> int:
        return int(self.head_dim * self.rotary_pct)

    def replace(self, **changes: Any) -> ModelArgs:
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise ModelArgsError(f"model.{unknown[0]}: {changes[unknown[0]]!r} is not a model field (misspelled?)")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
