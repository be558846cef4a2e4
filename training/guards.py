"""Loss guards: stop before the optimizer step on a non-finite loss or gradient norm, or on a loss spike (loss
above factor x the running mean of the last `window` accepted steps).

The judgement runs on the device, so a step never waits for the GPU to report its loss: `observe` returns a flag
the fused AdamW reads as `found_inf` and skips its update on (weights and step counts untouched), and the flag
stays set for every later step. The host learns of it at the next sync point (a logged step, a checkpoint, the
end), where `raise_if_stopped` raises with the first failing step. The loss is all-reduced before it gets here, so
every rank decides alike; the history is part of the checkpoint so resumes behave alike.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from training.config import GuardsSection
from training.errors import LossGuardError

_NONFINITE_LOSS, _SPIKE, _NONFINITE_GRAD = 1, 2, 3
__all__ = ["LossGuard", "LossGuardError"]


class LossGuard:
    def __init__(self, section: GuardsSection, device: torch.device) -> None:
        self.section = section
        self.device = device
        self.history = torch.zeros(section.loss_spike_window, dtype=torch.float64, device=device)
        self.count = torch.zeros((), dtype=torch.int64, device=device)  # losses accepted so far
        self.stopped = torch.zeros((), dtype=torch.bool, device=device)
        # The first failure: step, reason, loss, running mean, gradient norm.
        self.failure = torch.zeros(5, dtype=torch.float64, device=device)

    def observe(self, step: int, loss: Tensor, grad_norm: Tensor) -> Tensor:
        """Judge one step (loss and gradient norm as device scalars); returns 1.0 where the update must be skipped
        (this step or any earlier one failed), else 0.0, as a float32 device scalar. Accepts the loss otherwise."""
        loss, grad_norm = loss.to(torch.float64), grad_norm.to(torch.float64)
        section = self.section
        known = torch.clamp(self.count, max=section.loss_spike_window)
        mean = self.history.sum() / torch.clamp(known, min=1)
        reason = torch.zeros((), dtype=torch.int64, device=self.device)
        if section.stop_on_nonfinite:
            reason = torch.where(torch.isfinite(grad_norm), reason, _NONFINITE_GRAD)
        if section.loss_spike_factor is not None:
            spike = (known >= section.loss_spike_min_history) & (loss > section.loss_spike_factor * mean)
            reason = torch.where(spike, _SPIKE, reason)
        if section.stop_on_nonfinite:
            reason = torch.where(torch.isfinite(loss), reason, _NONFINITE_LOSS)
        first = (~self.stopped) & (reason > 0)
        step_value = torch.full((), float(step), **_like(loss))  # a fill kernel: no host-to-device copy to wait for
        record = torch.stack([step_value, reason.to(loss.dtype), loss, mean, grad_norm])
        self.failure = torch.where(first, record, self.failure)
        self.stopped |= reason > 0
        slot = (self.count % section.loss_spike_window).reshape(1)
        self.history.index_put_((slot,), torch.where(self.stopped, self.history[slot], loss.reshape(1)))
        self.count += (~self.stopped).to(torch.int64)
        return self.stopped.to(torch.float32)

    def raise_if_stopped(self) -> None:
        """Host side (synchronises with the device): raise for the first failing step, if any."""
        if not bool(self.stopped):
            return
        step, reason, loss, mean, grad_norm = self.failure.tolist()
        step, reason = int(step), int(reason)
        if reason == _NONFINITE_LOSS:
            raise LossGuardError(f"step {step}: loss is {loss}; stopping before the optimizer step")
        if reason == _NONFINITE_GRAD:
            raise LossGuardError(f"step {step}: gradient norm is {grad_norm}; stopping before the optimizer step")
        known = min(self.section.loss_spike_window, self.known_losses())
        raise LossGuardError(
            f"step {step}: loss {loss:.4f} is more than guards.loss_spike_factor {self.section.loss_spike_factor} x "
            f"the running mean {mean:.4f} of the last {known} steps; stopping before the optimizer step"
        )

    def known_losses(self) -> int:
        return int(self.count)

    def state_dict(self) -> dict[str, Any]:
        """The accepted losses of the window, oldest first (synchronises)."""
        window, count = self.section.loss_spike_window, int(self.count)
        values = self.history.tolist()
        if count <= window:
            return {"history": values[:count]}
        start = count % window
        return {"history": values[start:] + values[:start]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        losses = [float(x) for x in state.get("history", [])][-self.section.loss_spike_window :]
        self.history.zero_()
        if losses:
            self.history[: len(losses)] = torch.tensor(losses, dtype=torch.float64)
        self.count.fill_(len(losses))
        self.stopped.fill_(False)
        self.failure.zero_()


def _like(tensor: Tensor) -> dict[str, Any]:
    return {"dtype": tensor.dtype, "device": tensor.device}
