"""Model and optimizer as DCP Statefuls: sharded state dicts with plain parameter names (no FSDP/AC wrappers)."""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn
from torch.distributed.checkpoint.state_dict import (
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.checkpoint.stateful import Stateful
from torch.optim import Optimizer

from training.quantization.float8 import plain_tensor


class ModelState(Stateful):
    def __init__(self, model: nn.Module) -> None:
        self.model = model

    def state_dict(self) -> dict[str, Any]:
        # torchao's FP8 weight wrappers saved as the plain weights they hold (training/quantization/float8.py)
        state = get_model_state_dict(self.model)
        return {name: plain_tensor(value) if isinstance(value, Tensor) else value for name, value in state.items()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        set_model_state_dict(self.model, state_dict)


class OptimizerState(Stateful):
    def __init__(self, model: nn.Module, optimizer: Optimizer) -> None:
        self.model = model
        self.optimizer = optimizer

    def state_dict(self) -> dict[str, Any]:
        return get_optimizer_state_dict(self.model, self.optimizer)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        set_optimizer_state_dict(self.model, self.optimizer, state_dict)


def training_state(model: nn.Module, optimizer: Optimizer | None) -> dict[str, Stateful]:
    """The DCP state dict of a run; the export reads only the "model" part."""
    state: dict[str, Stateful] = {"model": ModelState(model)}
    if optimizer is not None:
        state["optim"] = OptimizerState(model, optimizer)
    return state
