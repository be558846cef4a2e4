"""A fine-tuning run's first weights: an HF directory (config.json + *.safetensors, read by checkpoint/hf_load.py) or
a run directory of ours (the model weights of its latest committed checkpoint; its optimizer, step and data position
are not taken: the new run starts at step 0 with a fresh optimizer). Loaded into the sharded model in place."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch.distributed.checkpoint as dcp
from torch import nn

from training.checkpoint.errors import CheckpointError
from training.checkpoint.hf_load import load_hf_weights
from training.checkpoint.layout import TRAINER_STATE, latest_complete
from training.checkpoint.storage import TensorFileReader
from training.config import ConfigError
from training.models.args import ModelArgs
from training.parallel.parallelize import plain_name


@dataclass(frozen=True)
class InitSource:
    kind: Literal["hf", "run"]
    path: Path  # the HF directory, or the committed checkpoint (ROOT/step-N)


def resolve_init(init: str, field: str = "finetune.init") -> InitSource:
    """An HF directory, a run directory (RUN/checkpoints/step-N) or a checkpoint root (ROOT/step-N)."""
    path = Path(init)
    if (path / "config.json").is_file():
        return InitSource("hf", path)
    for root in (path / "checkpoints", path):
        latest = latest_complete(root)
        if latest is not None:
            return InitSource("run", latest[1])
    raise ConfigError(
        [
            f"{field}: {init!r} is neither an HF directory (config.json + *.safetensors) nor a run directory with a "
            "committed checkpoint"
        ]
    )


def load_initial_weights(
    model: nn.Module, args: ModelArgs, source: InitSource, parameters: Iterable[tuple[str, nn.Parameter]]
) -> int:
    """Copy the start weights into `parameters` (the model's, or its base without adapters); returns the count."""
    if source.kind == "hf":
        return load_hf_weights(model, args, source.path, parameters)
    return _load_run_weights(args, source.path, parameters)


def _load_run_weights(args: ModelArgs, checkpoint: Path, parameters: Iterable[tuple[str, nn.Parameter]]) -> int:
    try:
        saved_args = json.loads((checkpoint / TRAINER_STATE).read_text(encoding="utf-8"))["model_args"]
    except (OSError, ValueError, KeyError) as error:
        raise CheckpointError(f"finetune.init: {str(checkpoint)!r} has no readable model shape: {error}") from None
    ours = args.to_dict()
    differing = sorted(key for key in ours if saved_args.get(key) != ours[key])
    if differing:
        key = differing[0]
        raise ConfigError(
            [f"model.{key}: {ours[key]!r} differs from {saved_args.get(key)!r} in the start checkpoint {checkpoint}"]
        )
    # The parameters themselves (DTensor shards or plain tensors) are the destinations: DCP reads into them in place
    # and casts (a bf16 frozen base from an fp32 checkpoint).
    state = {plain_name(name): param.data for name, param in parameters}
    reader = TensorFileReader(checkpoint)
    try:
        dcp.load({"model": state}, storage_reader=reader)
    except Exception as error:  # DCP wraps every failure; one line, then the run stops with a config error
        raise CheckpointError(f"finetune.init: loading {checkpoint} failed: {type(error).__name__}: {error}") from None
    finally:
        reader.stop_prefetch()
    return len(state)
