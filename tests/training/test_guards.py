import math

import pytest

from training.config import GuardsSection
from training.guards import LossGuard, LossGuardError


@pytest.mark.parametrize("loss", [math.nan, math.inf])
def test_non_finite_loss_stops(loss: float) -> None:
    with pytest.raises(LossGuardError, match=rf"step 3: loss is {loss}; stopping before the optimizer step"):
        LossGuard(GuardsSection()).check_loss(3, loss)


def test_non_finite_gradient_norm_stops() -> None:
    with pytest.raises(LossGuardError, match="step 9: gradient norm is inf"):
        LossGuard(GuardsSection()).check_grad_norm(9, math.inf)


def test_spike_over_the_running_mean_stops_only_with_enough_history() -> None:
    guard = LossGuard(GuardsSection(loss_spike_factor=2.0, loss_spike_window=4, loss_spike_min_history=3))
    guard.accept(3.0)
    guard.accept(3.0)
    guard.check_loss(3, 100.0)  # two steps of history: not judged yet
    guard.accept(3.0)
    guard.check_loss(4, 5.9)
    with pytest.raises(
        LossGuardError, match=r"step 4: loss 6.1000 is more than guards.loss_spike_factor 2.0 x the running mean 3.0000"
    ):
        guard.check_loss(4, 6.1)


def test_window_slides_and_state_round_trips() -> None:
    section = GuardsSection(loss_spike_window=3)
    guard = LossGuard(section)
    for loss in (9.0, 1.0, 2.0, 3.0):
        guard.accept(loss)
    assert guard.state_dict() == {"history": [1.0, 2.0, 3.0]}
    restored = LossGuard(section)
    restored.load_state_dict(guard.state_dict())
    assert list(restored.history) == [1.0, 2.0, 3.0]


def test_guards_can_be_turned_off() -> None:
    guard = LossGuard(GuardsSection(stop_on_nonfinite=False, loss_spike_factor=None))
    for _ in range(20):
        guard.accept(1.0)
    guard.check_loss(21, math.nan)
    guard.check_loss(21, 1e9)
