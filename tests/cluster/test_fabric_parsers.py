"""all_reduce_perf and nccom-test output, read from fixtures in the tools' exact print formats."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.fabric.parsers import format_bytes, parse_all_reduce_perf, parse_nccom_test

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "fabric"
GIB_IN_GB = (1 << 30) / 1e9


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_a_two_node_p5_run() -> None:
    run = parse_all_reduce_perf(fixture("all_reduce_perf-2x-p5.48xlarge.txt"))
    assert run.complete and run.failures == ()
    assert (run.ranks, run.hosts) == (16, ("ip-10-1-33-17", "ip-10-1-33-212"))
    assert run.timed_iterations == 20 and run.placements == 2 and run.out_of_bounds == 0
    assert len(run.sizes) == 32
    assert (run.sizes[0].size_bytes, run.sizes[-1].size_bytes) == (8, 16 << 30)
    assert run.sizes[-1].busbw_gb_per_s == (486.15, 487.59)
    assert run.avg_busbw_gb_per_s == 163.803
    assert [row.size_bytes for row in run.largest()] == [4 << 30, 8 << 30, 16 << 30]
    # median of 484.23 486.96 | 483.28 491.33 | 486.15 487.59
    assert run.large_message_busbw() == pytest.approx((486.15 + 486.96) / 2)


def test_a_run_that_crashed_has_no_summary_and_keeps_the_error_lines() -> None:
    run = parse_all_reduce_perf(fixture("all_reduce_perf-2x-p5.48xlarge-crashed.txt"))
    assert not run.complete and len(run.sizes) == 21
    assert run.failures == (
        "ip-10-1-33-212: Test NCCL failure common.cu:1304 'remote process exited or there was a network error / '",
        ".. ip-10-1-33-212 pid 21881: Test failure common.cu:1167",
    )


def test_wrong_values_are_counted_and_na_is_not() -> None:
    row = "     1048576        262144     float     sum      -1    63.44   16.53   30.99       3    63.46   16.52   30.98     N/A"
    run = parse_all_reduce_perf(row)
    assert run.sizes[0].wrong == 3 and run.sizes[0].busbw_gb_per_s == (30.99, 30.98)


def test_a_trn1_pair_in_gib_per_second_becomes_gb_per_second() -> None:
    run = parse_nccom_test(fixture("nccom-test-2x-trn1.32xlarge.txt"))
    assert run.complete and run.failures == () and run.placements == 1
    assert len(run.sizes) == 30 and run.sizes[-1].size_bytes == 4 << 30
    assert run.sizes[-1].busbw_gb_per_s == pytest.approx((51.52 * GIB_IN_GB,))
    assert run.avg_busbw_gb_per_s == pytest.approx(15.0126 * GIB_IN_GB)
    assert run.large_message_busbw() == pytest.approx(51.52 * GIB_IN_GB)  # median of 50.94, 51.64, 51.52


def test_nccom_columns_are_found_by_name() -> None:
    text = (
        "size(B)    count(elems)    total_input_size(B)    total_output_size(B)    type    time:avg(us)    "
        "algbw(GB/s)    busbw(GB/s)\n"
        "   1024             256                     32                    1024    fp32            6.16           "
        "0.17           0.16\n"
        "Avg bus bandwidth:      7.7715GB/s\n"
    )
    run = parse_nccom_test(text)
    assert run.sizes[0].size_bytes == 1024 and run.sizes[0].busbw_gb_per_s == pytest.approx((0.16 * GIB_IN_GB,))


def test_a_failed_nccom_run_keeps_its_error_lines() -> None:
    run = parse_nccom_test(fixture("nccom-test-2x-trn1.32xlarge-failed.txt"))
    assert not run.complete and len(run.sizes) == 17
    assert run.failures == (
        "1048576    Failure running neuron-bench - log file /tmp/nccom_test_log_x3k9w2ad.log",
        "1 errors found - test failed",
    )


def test_text_that_is_not_a_results_table_gives_no_rows() -> None:
    for parse in (parse_all_reduce_perf, parse_nccom_test):
        run = parse("srun: error: Unable to create step for job 12: Invalid generic resource (gres) specification\n")
        assert run.sizes == () and not run.complete
        with pytest.raises(ValueError):
            run.large_message_busbw()


@pytest.mark.parametrize(
    ("size", "text"),
    [(8, "8 B"), (524288, "512 KiB"), (16 << 30, "16 GiB"), (687194767200, "640.0 GiB"), (1 << 40, "1 TiB")],
)
def test_format_bytes(size: int, text: str) -> None:
    assert format_bytes(size) == text
