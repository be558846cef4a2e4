"""What a model family is: the torch-free descriptor every consumer reads instead of branching on `flavor`.

One family (training/models/<family>/) holds its block, its Hugging Face adapter, its named shapes and this
descriptor. The descriptor is plain data and shape arithmetic, so the planner (torch-free, on the head node) reads
it; the torch parts are named by module path and imported only when the trainer builds or loads a model.
No torch and no ModelArgs import here: ModelArgs itself validates against the registry (training/models/families.py).

No family needs a parallelize plan today: training/parallel/ wraps each block whatever its class (FSDP2 and the
checkpoint wrapper per block, an op-based selective policy), so a plan that does depend on the block (tensor
parallel) would be a new descriptor field here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Norm = Literal["rmsnorm", "layernorm"]
# Activation checkpointing modes whose saved tensors depend on the block ("full" keeps only the block input).
BLOCK_SAVING_MODES: tuple[str, ...] = ("none", "selective")


class Shape(Protocol):
    """The read-only view of ModelArgs a family's arithmetic uses (ModelArgs satisfies it)."""

    @property
    def flavor(self) -> str: ...
    @property
    def dim(self) -> int: ...
    @property
    def ffn_dim(self) -> int: ...
    @property
    def n_heads(self) -> int: ...
    @property
    def n_kv_heads(self) -> int | None: ...
    @property
    def head_dim(self) -> int: ...
    @property
    def attention_dim(self) -> int: ...
    @property
    def kv_heads(self) -> int: ...
    @property
    def rotary_pct(self) -> float: ...
    @property
    def attention_head_dim(self) -> int | None: ...
    @property
    def qk_norm(self) -> bool: ...
    @property
    def qkv_bias(self) -> bool: ...
    @property
    def is_moe(self) -> bool: ...
    @property
    def n_experts(self) -> int: ...
    @property
    def experts_per_token(self) -> int: ...
    @property
    def expert_width(self) -> int: ...
    @property
    def n_shared_experts(self) -> int: ...


@dataclass(frozen=True)
class LoraTarget:
    """One linear layer LoRA may adapt: its HF leaf name (PEFT's target_modules), our path inside a block, and
    its (in_features, out_features) for a shape."""

    hf_name: str
    module: str
    features: Callable[[Shape], tuple[int, int]]


@dataclass(frozen=True)
class BridgeRecipe:
    """A Megatron Bridge pretraining recipe: `module:function`, and the Hugging Face model id the function asks
    AutoBridge for (launch/bridge.py renders our config.json under that id; read from the recipe's source)."""

    module: str
    function: str
    hf_model_id: str


@dataclass(frozen=True)
class ModelFamily:
    """One model family. `name` is the `flavor` value of ModelArgs and job YAMLs.

    block: "module:Class" of the nn.Module stacked n_layers times (init_weights(init, std, n_layers) included).
    hf_adapter: "module:NAME" of its training.models.hf.HFAdapter (state-dict names, row layouts, config.json).
    configs: the module holding CONFIGS (named shapes) and PUBLISHED_TOTAL_PARAMS (their published sizes).
    """

    name: str
    description: str
    norm: Norm  # the blocks' and the final norm's kind
    block: str
    hf_adapter: str
    configs: str
    hf_model_types: tuple[str, ...]  # config.json model_type values the adapter reads
    # Problems a shape has in this family beyond the generic ones (features other families own).
    shape_problems: Callable[[Shape], list[str]]
    layer_parameters: Callable[[Shape], int]
    # Bytes-free counts: bf16 elements per token one block saves for backward, by mode in BLOCK_SAVING_MODES
    # (the norms' statistics and attention's per-head terms are added by planner/memory.py for every family).
    saved_activation_elements: Mapping[str, Callable[[Shape], int]]
    # The linears LoRA adapts (empty: the family has no LoRA); planner/finetune.py may size adapters from them.
    lora_targets: tuple[LoraTarget, ...] = ()
    # Why NeMo 2 (the 25.07 path, its llama3 recipe only) cannot train the family; None: its Llama recipe builds it.
    megatron_gap: str | None = None
    # The Megatron Bridge recipe that builds a shape of the family (dense and MoE shapes may differ); None: Bridge
    # has none, and bridge_gap says why.
    bridge_recipe: Callable[[Shape], BridgeRecipe] | None = None
    bridge_gap: str | None = None
    # NxDT's model section for a shape (launch/neuron.py adds the family-independent keys).
    neuron_architecture: Callable[[Shape], dict[str, Any]] = field(default=lambda shape: {})
    # (tensor, pipeline) parallel NxDT ran named shapes with (published runs); others get launch/neuron.py's default.
    neuron_parallelism: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    # Why NxDT (launch/neuron.py) cannot train the family; None: its Megatron GPT model section builds it.
    neuron_gap: str | None = None
    # Parameters of one block that a token's forward pass multiplies by (the routed experts it is not sent to
    # left out); None: all of layer_parameters (a dense block).
    active_layer_parameters: Callable[[Shape], int] | None = None

    def final_norm_parameters(self, dim: int) -> int:
        return dim if self.norm == "rmsnorm" else 2 * dim  # LayerNorm has a bias

    def lora_target(self, hf_name: str) -> LoraTarget | None:
        return next((target for target in self.lora_targets if target.hf_name == hf_name), None)


def dense_only_problems(shape: Shape, family: str) -> list[str]:
    """A dense family refuses experts, naming the families that have them."""
    if shape.is_moe:
        return [
            f"model.n_experts: {shape.n_experts!r} experts are a qwen3- or mixtral-flavor feature ({family} is dense)"
        ]
    return []


def load(reference: str) -> Any:
    """ "package.module:NAME" -> the object, importing the module (how the torch parts are reached lazily)."""
    module, _, name = reference.partition(":")
    return getattr(importlib.import_module(module), name)
