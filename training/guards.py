"""Loss guards: stop before the optimizer step on a non-finite loss or gradient norm, or on a loss spike
(loss above factor x the running mean of the last `window` steps). The check runs on the all-reduced loss, so
every rank reaches the same decision; the guard's history is part of the checkpoint so resumes behave alike."""

from __future__ import annotations

import math
from collections import deque
from typing import Any

from training.config import GuardsSection


class LossGuardError(RuntimeError):
    """Training must stop: the current step's update would corrupt the weights."""


class LossGuard:
    def __init__(self, section: GuardsSection) -> None:
        self.section = section
        self.history: deque[float] = deque(maxlen=section.loss_spike_window)

    def check_loss(self, step: int, loss: float) -> None:
        if self.section.stop_on_nonfinite and not math.isfinite(loss):
            raise LossGuardError(f"step {step}: loss is {loss}; stopping before the optimizer step")
        factor = self.section.loss_spike_factor
        if factor is not None and len(self.history) >= self.section.loss_spike_min_history:
            mean = sum(self.history) / len(self.history)
            if loss > factor * mean:
                raise LossGuardError(
                    f"step {step}: loss {loss:.4f} is more than guards.loss_spike_factor {factor} x the running mean "
                    f"{mean:.4f} of the last {len(self.history)} steps; stopping before the optimizer step"
                )

    def check_grad_norm(self, step: int, grad_norm: float) -> None:
        if self.section.stop_on_nonfinite and not math.isfinite(grad_norm):
            raise LossGuardError(f"step {step}: gradient norm is {grad_norm}; stopping before the optimizer step")

    def accept(self, loss: float) -> None:
        """Record a loss whose step was applied."""
        self.history.append(loss)

    def state_dict(self) -> dict[str, Any]:
        return {"history": list(self.history)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.history.clear()
        self.history.extend(float(x) for x in state.get("history", []))
