"""Mixtral block: the Qwen3 block's layout (training/models/qwen3/model.py) without q/k norms: Llama attention,
then the mixture-of-experts feed-forward (training/models/moe.py). Mistral's sliding-window attention is refused
(training/models/mixtral/hf.py), as every Mixtral release leaves it off."""

from __future__ import annotations

from training.models.qwen3.model import Qwen3Block


class MixtralBlock(Qwen3Block):
    """The same module; its own name so that checkpoints and the registry say which family built it."""
