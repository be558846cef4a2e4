"""Runs inside the NeMo 2 container, one process per GPU under srun:
`python training/jobs/nemo_pretrain.py --config RUN_DIR/nemo-config.yaml`

The config (rendered by `python -m training.submit --backend nemo`) names a NeMo 2 recipe, dotted overrides
of its fields (shape, schedule, parallelism, checkpoints) and the dataset (our .bin/.idx prefix and tokenizer).
Imports NeMo only in main(), so the override logic is testable without it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import yaml


class OverrideError(AttributeError):
    """An override names a field the recipe does not have (a typo must not silently add a new attribute)."""


def apply_overrides(recipe: Any, overrides: dict[str, Any]) -> None:
    for dotted, value in overrides.items():
        *parents, leaf = dotted.split(".")
        node = recipe
        walked = []
        for name in parents:
            walked.append(name)
            if not hasattr(node, name):
                raise OverrideError(f"override {dotted!r}: the recipe has no {'.'.join(walked)!r}")
            node = getattr(node, name)
        if not hasattr(node, leaf):
            raise OverrideError(f"override {dotted!r}: the recipe has no {dotted!r}")
        setattr(node, leaf, value)


def load_config(path: str | Path) -> dict[str, Any]:
    config = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    missing = [
        key
        for key in ("recipe", "name", "log_dir", "num_nodes", "gpus_per_node", "overrides", "data")
        if key not in config
    ]
    if missing:
        raise ValueError(f"{path}: missing {', '.join(missing)}")
    return config


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="NeMo 2 pretraining from a rendered recipe override file")
    parser.add_argument("--config", required=True)
    config = load_config(parser.parse_args(argv).config)

    import nemo_run as run
    from nemo.collections import llm
    from nemo.collections.common.tokenizers.huggingface.auto_tokenizer import AutoTokenizer

    recipe = getattr(llm, config["recipe"]).pretrain_recipe(
        name=config["name"],
        dir=config["log_dir"],
        num_nodes=config["num_nodes"],
        num_gpus_per_node=config["gpus_per_node"],
    )
    apply_overrides(recipe, config["overrides"])
    data = config["data"]
    recipe.data = run.Config(
        llm.PreTrainingDataModule,
        paths=data["paths"],
        seq_length=data["seq_length"],
        global_batch_size=data["global_batch_size"],
        micro_batch_size=data["micro_batch_size"],
        split=data["split"],
        seed=data["seed"],
        tokenizer=run.Config(AutoTokenizer, pretrained_model_name=data["tokenizer"]),
    )
    # srun already started one process per GPU: run the recipe in this process, no executor of its own.
    run.run(recipe, direct=True)


if __name__ == "__main__":
    main()
