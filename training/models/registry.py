"""Named model shapes: one table, gathered from every family's configs (training/models/<family>/configs.py).

The trainer (`model.name` in a job YAML), the planner (`llm-plan --model`) and the published benchmark tables
all resolve a name here. Names run smallest first, so listings start with the demo shapes.
"""

from __future__ import annotations

import importlib

from training.models.args import ModelArgs, ModelArgsError
from training.models.families import FAMILIES
from training.models.params import count_parameters


def _gathered(table: str) -> dict[str, object]:
    """One table (CONFIGS, PUBLISHED_TOTAL_PARAMS) of every family's configs module, refusing a name twice."""
    out: dict[str, object] = {}
    for family in FAMILIES.values():
        entries = getattr(importlib.import_module(family.configs), table)
        for name, value in entries.items():
            if name in out:
                raise ModelArgsError(f"model.name: {name!r} is named by two families' {table}")
            out[name] = value
    return out


def _configs() -> dict[str, ModelArgs]:
    configs = {name: args for name, args in _gathered("CONFIGS").items() if isinstance(args, ModelArgs)}
    return dict(sorted(configs.items(), key=lambda item: (count_parameters(item[1]).total, item[0])))


MODEL_CONFIGS: dict[str, ModelArgs] = _configs()

# Sizes as published (model cards / papers), used by the tests to check the shapes above.
PUBLISHED_TOTAL_PARAMS: dict[str, int] = {
    name: size for name, size in _gathered("PUBLISHED_TOTAL_PARAMS").items() if isinstance(size, int)
}


def get_model_args(name: str) -> ModelArgs:
    try:
        return MODEL_CONFIGS[name]
    except KeyError:
        known = ", ".join(MODEL_CONFIGS)
        raise ModelArgsError(f"model.name: {name!r} is not a known model (known: {known})") from None
