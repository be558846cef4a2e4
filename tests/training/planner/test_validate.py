"""Leave-one-source-out validation: refit without a source, predict it; per-layout errors; the docs are current."""

from pathlib import Path

import pytest

from training.planner.compare import compare_all
from training.planner.published import ALL_ROWS, SOURCES
from training.planner.validate import layout_summary, leave_one_source_out, markdown_report

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def held_out():
    return leave_one_source_out()


def test_every_row_cites_a_source_with_title_url_and_hardware() -> None:
    for row in ALL_ROWS:
        source = SOURCES[row.source]
        assert source.title and source.url.startswith("https://") and source.hardware, row.key


def test_hsdp_rows_come_from_two_sources_and_none_is_fitted() -> None:
    hsdp = [row for row in ALL_ROWS if row.layout == "hsdp"]
    assert len({row.source for row in hsdp}) >= 2
    assert all(row.holdout for row in hsdp)


def test_every_hsdp_row_is_predicted_within_15_percent() -> None:
    for comparison in compare_all():
        if comparison.row.layout == "hsdp":
            assert abs(comparison.error) <= 0.15, (comparison.row.key, comparison.metric, comparison.error)


def test_leave_one_source_out_never_fits_the_source_it_predicts(held_out) -> None:
    assert {p.left_out for p in held_out} == {row.source for row in ALL_ROWS}
    for prediction in held_out:
        assert prediction.comparison.row.source == prediction.left_out


def test_leave_one_source_out_mean_error_is_within_15_percent_per_layout(held_out) -> None:
    summary = layout_summary(held_out)
    multi = {layout: s for layout, s in summary.items() if s.sources >= 2}
    assert {"fsdp", "hsdp"} <= set(multi)
    for layout, s in multi.items():
        assert s.mean_error <= 0.15, (layout, s)


def test_docs_hold_the_current_report(held_out) -> None:
    doc = (ROOT / "docs" / "planner.md").read_text()
    assert markdown_report(held_out) in doc, "stale: run python -m training.planner.validate --write"
