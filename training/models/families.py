"""The model-family registry: every family the trainer, the planner and the renderers know. Imports no torch.

Adding a family: its folder training/models/<family>/ (family.py, configs.py, model.py, hf.py) and one entry here;
tests/training/models/test_families.py fails until every piece is there (docs/extending.md).
"""

from __future__ import annotations

from training.models.family import ModelFamily
from training.models.llama.family import LLAMA
from training.models.mixtral.family import MIXTRAL
from training.models.neox.family import NEOX
from training.models.qwen3.family import QWEN3

FAMILIES: dict[str, ModelFamily] = {family.name: family for family in (LLAMA, NEOX, QWEN3, MIXTRAL)}


def family_named(flavor: str) -> ModelFamily:
    """The family behind a `flavor` value; ModelArgs has already refused unknown ones."""
    try:
        return FAMILIES[flavor]
    except KeyError:
        raise KeyError(f"model.flavor: {flavor!r} is not one of {', '.join(FAMILIES)}") from None
