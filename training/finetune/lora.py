"""LoRA as a model converter: applied to the model built on the meta device, before parallelize (the model code
holds neither parallelism nor adapters).

Each target nn.Linear becomes a LoRALinear that keeps the base weight under its own name (checkpoints, the HF
loader and the export see the same names) and adds lora_a [rank, in] and lora_b [out, rank]:
y = W x + (alpha / rank) * B A dropout(x). A starts as kaiming-uniform (nn.Linear's and PEFT's bound 1/sqrt(in)),
B at zero, so the converted model starts equal to the base. Everything but the adapters is frozen, and stored in
the compute dtype (bf16 wherever training computes in bf16): a frozen weight needs no fp32 master copy. The
adapters stay fp32 masters, cast for compute by FSDP2's policy or autocast like any trainable parameter.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from training.config import ConfigError
from training.finetune.config import LoraSection
from training.models.args import ModelArgs
from training.models.families import family_named
from training.models.init import WeightInit

ADAPTER_SUFFIXES = (".lora_a", ".lora_b")


class LoRALinear(nn.Linear):
    """nn.Linear with a trainable low-rank update; `weight` (and `bias`) are the base's own parameters."""

    def __init__(self, base: nn.Linear, rank: int, alpha: float, dropout: float) -> None:
        nn.Module.__init__(self)  # not nn.Linear's: the base weight exists already
        self.in_features, self.out_features = base.in_features, base.out_features
        self.weight = base.weight
        self.bias = base.bias
        device = base.weight.device
        self.lora_a = nn.Parameter(torch.empty(rank, self.in_features, device=device, dtype=torch.float32))
        self.lora_b = nn.Parameter(torch.empty(self.out_features, rank, device=device, dtype=torch.float32))
        self.rank, self.alpha = rank, alpha
        self.scale = alpha / rank
        self.dropout: nn.Module = nn.Dropout(dropout) if dropout > 0 else nn.Identity()

    def forward(self, x: Tensor) -> Tensor:
        update = F.linear(F.linear(self.dropout(x), self.lora_a), self.lora_b)
        return F.linear(x, self.weight, self.bias) + update * self.scale

    @torch.no_grad()
    def init_adapter(self, init: WeightInit) -> None:
        init.uniform_(self.lora_a, 1.0 / math.sqrt(self.in_features))
        self.lora_b.zero_()

    @torch.no_grad()
    def merged_weight(self) -> Tensor:
        """W + scale B A in fp32 (plain tensors: call on an unsharded model)."""
        return self.weight.float() + self.scale * (self.lora_b.float() @ self.lora_a.float())


def is_adapter(name: str) -> bool:
    return name.endswith(ADAPTER_SUFFIXES)


def target_paths(args: ModelArgs, targets: tuple[str, ...]) -> dict[str, str]:
    """HF leaf name (PEFT's target_modules) -> our module inside a block, from the family's LoRA targets."""
    family = family_named(args.flavor)
    if not family.lora_targets:
        raise ConfigError([f"finetune.mode: 'lora' supports Llama-shaped models, not model.flavor {args.flavor!r}"])
    paths = {target.hf_name: target.module for target in family.lora_targets}
    unknown = [name for name in targets if name not in paths]
    if unknown:
        raise ConfigError(
            [
                f"finetune.lora.target_modules: {unknown[0]!r} names no module of the model; its linear layers are "
                f"{', '.join(paths)}"
            ]
        )
    return {name: paths[name] for name in targets}


def apply_lora(model: nn.Module, args: ModelArgs, section: LoraSection, frozen_dtype: torch.dtype) -> int:
    """Wrap the targets of every block, freeze the rest in `frozen_dtype`; returns the trainable parameter count."""
    paths = target_paths(args, section.target_modules)
    layers = model.get_submodule("layers")
    assert isinstance(layers, nn.ModuleList)
    for block in layers:
        for path in paths.values():
            parent_name, _, leaf = path.rpartition(".")
            parent = block.get_submodule(parent_name)
            base = getattr(parent, leaf)
            assert isinstance(base, nn.Linear), f"{path} is not an nn.Linear"
            setattr(parent, leaf, LoRALinear(base, section.rank, section.alpha, section.dropout))
    _freeze_base(model, frozen_dtype)
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def _freeze_base(model: nn.Module, dtype: torch.dtype) -> None:
    for module in model.modules():
        for name, param in list(module._parameters.items()):
            if param is None or f".{name}" in ADAPTER_SUFFIXES:
                continue
            module._parameters[name] = nn.Parameter(param.detach().to(dtype), requires_grad=False)


def lora_modules(model: nn.Module) -> Iterator[tuple[str, LoRALinear]]:
    for name, module in model.named_modules():
        if isinstance(module, LoRALinear):
            yield name, module


def init_adapters(model: nn.Module, seed: int) -> None:
    """A and B as at the start of any LoRA run; the same numbers at any world size (models/init.py)."""
    init = WeightInit(model, seed)
    for _, module in lora_modules(model):
        module.init_adapter(init)


def base_parameters(model: nn.Module) -> Iterator[tuple[str, nn.Parameter]]:
    """The model's parameters without the adapters: what a start checkpoint (HF or ours) holds."""
    for name, param in model.named_parameters():
        if not is_adapter(name):
            yield name, param
