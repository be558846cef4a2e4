import math

import pytest
import torch

from training.config import GuardsSection
from training.guards import LossGuard, LossGuardError

CPU = torch.device("cpu")


def _observe(guard: LossGuard, step: int, loss: float, grad_norm: float = 1.0) -> float:
    flag = guard.observe(step, torch.tensor(loss), torch.tensor(grad_norm))
    assert flag.dtype == torch.float32 and flag.device == CPU
    return float(flag)


@pytest.mark.parametrize("loss", [math.nan, math.inf])
def test_non_finite_loss_stops(loss: float) -> None:
    guard = LossGuard(GuardsSection(), CPU)
    assert _observe(guard, 3, loss) == 1.0
    with pytest.raises(LossGuardError, match=rf"step 3: loss is {loss}; stopping before the optimizer step"):
        guard.raise_if_stopped()


def test_non_finite_gradient_norm_stops() -> None:
    guard = LossGuard(GuardsSection(), CPU)
    assert _observe(guard, 9, 2.0, math.inf) == 1.0
    with pytest.raises(LossGuardError, match="step 9: gradient norm is inf"):
        guard.raise_if_stopped()


def test_spike_over_the_running_mean_stops_only_with_enough_history() -> None:
    guard = LossGuard(GuardsSection(loss_spike_factor=2.0, loss_spike_window=4, loss_spike_min_history=3), CPU)
    assert [_observe(guard, step, 3.0) for step in (1, 2)] == [0.0, 0.0]
    guard = LossGuard(GuardsSection(loss_spike_factor=2.0, loss_spike_window=4, loss_spike_min_history=3), CPU)
    _observe(guard, 1, 3.0)
    _observe(guard, 2, 3.0)
    assert _observe(guard, 3, 100.0) == 0.0  # two steps of history: not judged yet (and accepted)
    guard = LossGuard(GuardsSection(loss_spike_factor=2.0, loss_spike_window=4, loss_spike_min_history=3), CPU)
    for step in (1, 2, 3):
        _observe(guard, step, 3.0)
    assert _observe(guard, 4, 5.9) == 0.0
    guard.raise_if_stopped()
    assert _observe(guard, 5, 9.0) == 1.0  # mean of 3, 3, 3, 5.9 is 3.725
    with pytest.raises(
        LossGuardError, match=r"step 5: loss 9.0000 is more than guards.loss_spike_factor 2.0 x the running mean 3.7250"
    ):
        guard.raise_if_stopped()


def test_a_stop_is_sticky_and_names_the_first_failing_step() -> None:
    guard = LossGuard(GuardsSection(), CPU)
    _observe(guard, 1, 2.0)
    assert _observe(guard, 2, math.nan) == 1.0
    assert _observe(guard, 3, 2.0) == 1.0  # later steps stay skipped until the host looks
    assert guard.state_dict() == {"history": [2.0]}
    with pytest.raises(LossGuardError, match="step 2: loss is nan"):
        guard.raise_if_stopped()


def test_window_slides_and_state_round_trips() -> None:
    section = GuardsSection(loss_spike_window=3)
    guard = LossGuard(section, CPU)
    for step, loss in enumerate([1.0, 2.0, 3.0, 4.0, 5.0], start=1):
        _observe(guard, step, loss)
    assert guard.state_dict() == {"history": [3.0, 4.0, 5.0]}
    restored = LossGuard(section, CPU)
    restored.load_state_dict(guard.state_dict())
    assert restored.state_dict() == {"history": [3.0, 4.0, 5.0]}
    _observe(restored, 6, 6.0)
    assert restored.state_dict() == {"history": [4.0, 5.0, 6.0]}


def test_guards_can_be_turned_off() -> None:
    guard = LossGuard(GuardsSection(stop_on_nonfinite=False, loss_spike_factor=None), CPU)
    for step in range(1, 21):
        _observe(guard, step, 1.0)
    assert _observe(guard, 21, math.nan) == 0.0
    assert _observe(guard, 22, 1e9) == 0.0
    guard.raise_if_stopped()
