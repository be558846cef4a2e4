"""Every registered model family is complete: block, HF adapter, named shapes, the planner's shape facts, LoRA
targets and recipe facts. A family missing any piece fails here, naming the family and the piece."""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

import pytest
import torch
from torch import nn

from training.models.args import FLAVORS, ModelArgs, ModelArgsError
from training.models.families import FAMILIES, family_named
from training.models.family import BLOCK_SAVING_MODES, ModelFamily, load
from training.models.hf import HFAdapter, args_from_hf_config, hf_config, hf_name
from training.models.params import count_parameters
from training.models.transformer import build_model


def _smallest(configs: dict[str, ModelArgs]) -> ModelArgs:
    return min(configs.values(), key=lambda args: count_parameters(args).total)


def _loaded(family: ModelFamily, piece: str, reference: str) -> tuple[Any, list[str]]:
    try:
        return load(reference), []
    except (ImportError, AttributeError, ValueError) as error:
        return None, [f"{family.name}: {piece} {reference!r} does not load ({error})"]


def _configs_problems(family: ModelFamily) -> tuple[dict[str, ModelArgs], list[str]]:
    try:
        module = importlib.import_module(family.configs)
    except ImportError as error:
        return {}, [f"{family.name}: configs {family.configs!r} does not import ({error})"]
    configs = getattr(module, "CONFIGS", None)
    sizes = getattr(module, "PUBLISHED_TOTAL_PARAMS", None)
    if not isinstance(configs, dict) or not configs:
        return {}, [f"{family.name}: configs {family.configs!r} has no CONFIGS (at least one named shape)"]
    problems = [
        f"{family.name}: configs {name!r} is not a ModelArgs of flavor {family.name!r}"
        for name, args in configs.items()
        if not isinstance(args, ModelArgs) or args.flavor != family.name
    ]
    if not isinstance(sizes, dict) or set(sizes) - set(configs):
        problems.append(f"{family.name}: PUBLISHED_TOTAL_PARAMS must be a dict naming only CONFIGS entries")
    return configs, problems


def _block_problems(family: ModelFamily, args: ModelArgs) -> list[str]:
    block, problems = _loaded(family, "block", family.block)
    if problems:
        return problems
    if not (isinstance(block, type) and issubclass(block, nn.Module) and hasattr(block, "init_weights")):
        return [f"{family.name}: block {family.block!r} is not an nn.Module with init_weights"]
    with torch.device("meta"):
        built = block(args)
    if sum(p.numel() for p in built.parameters()) != family.layer_parameters(args):
        problems.append(f"{family.name}: layer_parameters disagrees with the built block")
    modules = dict(built.named_modules())
    for target in family.lora_targets:
        linear = modules.get(target.module)
        if not isinstance(linear, nn.Linear) or (linear.in_features, linear.out_features) != target.features(args):
            problems.append(f"{family.name}: LoRA target {target.hf_name!r} ({target.module}) is not that linear")
    return problems


def _hf_problems(family: ModelFamily, args: ModelArgs) -> list[str]:
    adapter, problems = _loaded(family, "hf_adapter", family.hf_adapter)
    if problems:
        return problems
    if not isinstance(adapter, HFAdapter):
        return [f"{family.name}: hf_adapter {family.hf_adapter!r} is not an HFAdapter"]
    if not family.hf_model_types:
        return [f"{family.name}: hf_model_types is empty (the config.json model_type it reads)"]
    try:
        for name, _ in build_model(args).named_parameters():
            hf_name(args, name)
        read_back = args_from_hf_config(hf_config(args))
        # n_kv_heads None and n_kv_heads == n_heads are one shape; config.json spells it out.
        if read_back.replace(n_kv_heads=read_back.kv_heads) != args.replace(n_kv_heads=args.kv_heads):
            problems.append(f"{family.name}: config.json does not round-trip the shape")
    except (KeyError, ModelArgsError) as error:
        problems.append(f"{family.name}: HF mapping incomplete ({error})")
    return problems


def _planner_problems(family: ModelFamily, args: ModelArgs, configs: dict[str, ModelArgs]) -> list[str]:
    problems = []
    missing = [mode for mode in BLOCK_SAVING_MODES if mode not in family.saved_activation_elements]
    if missing:
        problems.append(f"{family.name}: saved_activation_elements lacks {', '.join(missing)}")
    else:
        saved = [family.saved_activation_elements[mode](args) for mode in ("selective", "none")]
        if not 0 < saved[0] <= saved[1]:
            problems.append(f"{family.name}: selective checkpointing must save fewer elements than none ({saved})")
    if set(family.neuron_parallelism) - set(configs):
        problems.append(f"{family.name}: neuron_parallelism names shapes that are not its configs")
    if not family.neuron_architecture(args).get("normalization"):
        problems.append(f"{family.name}: neuron_architecture gives no normalization")
    return problems


def family_problems(family: ModelFamily) -> list[str]:
    """Everything a family must provide, one line per missing or inconsistent piece."""
    configs, problems = _configs_problems(family)
    if not configs:
        return problems
    args = _smallest(configs).replace(n_layers=1)
    return [
        *problems,
        *_block_problems(family, args),
        *_hf_problems(family, args),
        *_planner_problems(family, args, configs),
    ]


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_family_provides_every_piece(name: str) -> None:
    assert family_problems(FAMILIES[name]) == []


def test_the_families_are_the_flavors_and_read_distinct_hf_model_types() -> None:
    assert tuple(FAMILIES) == FLAVORS
    assert all(family_named(name).name == name for name in FAMILIES)
    model_types = [model_type for family in FAMILIES.values() for model_type in family.hf_model_types]
    assert len(model_types) == len(set(model_types))


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"hf_adapter": "training.models.llama.hf:NO_SUCH_ADAPTER"}, "llama: hf_adapter"),
        ({"saved_activation_elements": {}}, "llama: saved_activation_elements lacks none, selective"),
        ({"block": "training.models.neox.model:NeoXBlock"}, "llama: layer_parameters disagrees"),
        ({"configs": "training.models.no_such_family.configs"}, "llama: configs"),
        ({"neuron_parallelism": {"neox-20b": (8, 4)}}, "llama: neuron_parallelism names shapes"),
    ],
)
def test_an_incomplete_family_is_named_with_its_missing_piece(changes: dict[str, Any], expected: str) -> None:
    # The check itself: a family with one piece missing or wrong does not pass.
    broken = dataclasses.replace(FAMILIES["llama"], **changes)
    problems = family_problems(broken)
    assert any(line.startswith(expected) for line in problems), problems
