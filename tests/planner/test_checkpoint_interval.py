import math

import pytest

from planner.checkpoint_interval import (
    FAILURES_PER_ACCELERATOR_HOUR,
    checkpoint_interval,
    fleet_mtbf_s,
    young_interval_s,
)


def test_the_failure_rate_is_llama_3s_and_gives_its_fleet_one_interruption_every_3_hours() -> None:
    assert round(FAILURES_PER_ACCELERATOR_HOUR, 7) == 1.97e-5
    # 419 unexpected interruptions in 54 days on 16,384 GPUs: about one every 3.1 hours.
    assert fleet_mtbf_s(16_384) / 3600 == pytest.approx(54 * 24 / 419)
    assert fleet_mtbf_s(64) == pytest.approx(256 * fleet_mtbf_s(16_384))


def test_youngs_interval_balances_the_save_against_the_work_a_failure_loses() -> None:
    assert young_interval_s(400.0, 2_000_000.0) == pytest.approx(40_000.0)

    # The expected waste per hour, save/interval + interval/(2 MTBF), is least there.
    def waste(interval: float) -> float:
        return 400.0 / interval + interval / (2 * 2_000_000.0)

    assert waste(40_000.0) < min(waste(30_000.0), waste(50_000.0))


def test_the_interval_in_steps_is_whole_at_least_one_and_absent_without_a_step_time() -> None:
    planned = checkpoint_interval(save_s=328.0, step_s=5.0, accelerators=64)
    assert planned is not None
    assert planned.steps == round(math.sqrt(2 * 328.0 * fleet_mtbf_s(64)) / 5.0)
    tiny = checkpoint_interval(save_s=0.01, step_s=3600.0, accelerators=1)
    assert tiny is not None and tiny.steps == 1
    assert checkpoint_interval(save_s=328.0, step_s=0.0, accelerators=64) is None  # the planner could not time it
    assert planned.as_json()["every_steps"] == planned.steps
