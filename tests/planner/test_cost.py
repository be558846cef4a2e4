import pytest

from planner.cost import job_cost
from planner.published import TRAINIUM_ROWS
from planner.step_time import estimate_step


@pytest.mark.parametrize("row", TRAINIUM_ROWS, ids=lambda row: row.key)
def test_trainium_blogs_tokens_per_dollar_is_its_own_throughput_times_price(row) -> None:
    # The table's last column is seq/s x 2048 x 3600 / ($/h): check the published arithmetic, then ours.
    published = row.published
    assert published["sequences_per_s"] * 2048 * 3600 / published["cluster_usd_per_hour"] == pytest.approx(
        published["tokens_per_usd"], rel=0.001
    )
    step = estimate_step(row.job)
    cost = job_cost(row.job, step)
    assert cost.usd_per_hour == pytest.approx(published["cluster_usd_per_hour"])
    assert cost.tokens_per_usd == pytest.approx(step.tokens_per_s * 3600 / cost.usd_per_hour)


def test_days_and_dollars_for_a_token_budget() -> None:
    row = TRAINIUM_ROWS[0]
    step = estimate_step(row.job)
    cost = job_cost(row.job, step, tokens=1e9)
    assert cost.days == pytest.approx(1e9 / step.tokens_per_s / 86400)
    assert cost.usd == pytest.approx(cost.days * 24 * 7.59)
    assert job_cost(row.job, step).days is None
