"""The NeMo runner's override logic (the NeMo import itself only happens inside the container)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from training.jobs.nemo_pretrain import OverrideError, apply_overrides, load_config


def _recipe() -> SimpleNamespace:
    return SimpleNamespace(
        model=SimpleNamespace(config=SimpleNamespace(num_layers=32, hidden_size=4096)),
        trainer=SimpleNamespace(max_steps=100, strategy=SimpleNamespace(tensor_model_parallel_size=1)),
    )


def test_overrides_set_existing_fields() -> None:
    recipe = _recipe()
    apply_overrides(recipe, {"model.config.num_layers": 4, "trainer.strategy.tensor_model_parallel_size": 2})
    assert recipe.model.config.num_layers == 4 and recipe.trainer.strategy.tensor_model_parallel_size == 2


@pytest.mark.parametrize(
    ("dotted", "message"),
    [
        ("model.config.num_layer", "the recipe has no 'model.config.num_layer'"),
        ("optim.lr", "the recipe has no 'optim'"),
    ],
)
def test_a_misspelled_override_fails_instead_of_adding_a_field(dotted: str, message: str) -> None:
    with pytest.raises(OverrideError, match=message):
        apply_overrides(_recipe(), {dotted: 1})


def test_a_config_missing_sections_is_named(tmp_path: Path) -> None:
    path = tmp_path / "nemo.yaml"
    path.write_text(yaml.safe_dump({"recipe": "llama3_8b", "name": "x"}))
    with pytest.raises(ValueError, match="missing log_dir, num_nodes, gpus_per_node, overrides, data"):
        load_config(path)
