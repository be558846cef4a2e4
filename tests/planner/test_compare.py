"""Each published row is reproduced within its table's tolerance (15 %), fitted and held-out rows alike."""

import pytest

from planner.calibration import CALIBRATED
from planner.compare import compare_all
from planner.fit import fit, loss

COMPARISONS = compare_all()


@pytest.mark.parametrize("comparison", COMPARISONS, ids=lambda c: f"{c.row.key}:{c.metric}")
def test_published_row_is_reproduced_within_tolerance(comparison) -> None:
    assert comparison.within_tolerance, (
        f"{comparison.row.key} {comparison.metric}: predicted {comparison.predicted:.4g}, "
        f"published {comparison.published:.4g} ({comparison.error:+.1%}, tolerance {comparison.tolerance:.0%})"
    )


# torchtitan's float8 and pipeline rows are held out; its pipeline rows' misses beyond 15 % are bounded by their own
# tolerance (docs/planner.md, "Where the planner misses").
UNFITTED_STACKS = ("torchtitan",)


def test_held_out_rows_are_predicted_within_tolerance_too() -> None:
    # a row with a tolerance of its own is a documented miss (test_only_documented_rows_miss_15_percent names them)
    held = [c for c in COMPARISONS if c.row.holdout and c.row.table not in UNFITTED_STACKS and c.row.tolerance is None]
    assert len(held) >= 15
    assert max(abs(c.error) for c in held) <= 0.15


def test_the_unfitted_stacks_miss_only_where_the_docs_say() -> None:
    misses = {c.row.key for c in COMPARISONS if c.row.table in UNFITTED_STACKS and abs(c.error) > 0.15}
    # its float8 8B rows land within 15 % since the planner charges torchao's casts (step_time.torchao_float8_cast_bytes)
    assert misses == {"torchtitan/5/1f1b", "torchtitan/5/interleaved-1f1b"}


def test_only_documented_rows_miss_15_percent() -> None:
    misses = {c.row.key for c in COMPARISONS if abs(c.error) > 0.15 and c.row.table not in UNFITTED_STACKS}
    # the rowwise FP8 row: the planner times torchao's tensorwise recipe, and rowwise's scaled GEMMs are slower
    assert misses == {"megatron-readme/32b", "ours/h200/ours/compiled/fp8-rowwise/ed62452"}
    assert all(c.row.tolerance is None or c.row.key in misses or c.row.table in UNFITTED_STACKS for c in COMPARISONS)


def test_committed_parameters_are_the_fitted_optimum() -> None:
    refitted = fit(CALIBRATED, restarts=1)
    assert loss(CALIBRATED) <= loss(refitted) + 1e-3
    for key, value in CALIBRATED.matmul_fraction.items():
        assert 0.2 < value < 0.95, key  # physical: no accelerator runs at or near its peak
    assert 0.1 < CALIBRATED.network_efficiency <= 0.9
    assert all(0.0 <= value <= 1.0 for value in CALIBRATED.overlap_fraction.values())
    assert 0.0 <= CALIBRATED.tp_overlap_fraction <= 1.0


def _ddp_speedups(model: str, micro_batch: int) -> list[float]:
    from planner.job import Job
    from planner.published import P4D, SMDDP
    from planner.step_time import estimate_step
    from training.models.registry import get_model_args

    def rate(nodes: int) -> float:
        job = Job(get_model_args(model), P4D, nodes, 2048, micro_batch, software=SMDDP)
        return estimate_step(job).tokens_per_s

    return [round(rate(nodes) / rate(1), 2) for nodes in (2, 4, 8)]


def test_sagemaker_talk_sensitivity_stated_in_the_docs() -> None:
    # docs/planner.md quotes these to show how much the unnamed workload matters.
    assert _ddp_speedups("125m", 4) == pytest.approx([1.99, 3.62, 6.74], abs=0.02)
    assert _ddp_speedups("1b", 2) == pytest.approx([1.46, 2.38, 4.18], abs=0.02)
