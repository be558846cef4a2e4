from bench.profiling import (
    call_count,
    cumulative_seconds,
    own_seconds,
    own_time_difference,
    profiled,
    summarize,
    top_rows,
)


def _leaf() -> int:
    return sum(range(20_000))


def _caller() -> int:
    return _leaf() + _leaf()


def test_cumulative_and_own_seconds_find_functions_by_file_and_name() -> None:
    profiler = profiled(_caller)
    assert cumulative_seconds(profiler, "test_profiling.py", "_caller") >= cumulative_seconds(
        profiler, "test_profiling.py", "_leaf"
    )
    assert cumulative_seconds(profiler, "test_profiling.py", "_leaf") > 0
    assert cumulative_seconds(profiler, "other.py", "_leaf") == 0
    assert own_seconds(profiler, "no such function") == 0
    assert own_seconds(profiler, "built-in method builtins.sum") > 0


def test_top_rows_keep_the_summary_the_header_and_the_requested_rows() -> None:
    rows = top_rows(profiled(_caller), 2)
    assert "function calls" in rows[0]
    assert rows[1].split()[:2] == ["ncalls", "tottime"]
    assert len(rows) == 4


def test_summarize_without_a_table_keeps_only_the_summary() -> None:
    assert summarize("   3 function calls in 0.000 seconds\n\n", 5) == ["3 function calls in 0.000 seconds"]


def test_difference_lists_functions_only_the_first_profile_ran_with_zero_on_the_other_side() -> None:
    rows = own_time_difference(profiled(_caller), profiled(lambda: None), runs=1, count=50)
    assert rows[:2] == ["| function | ours ms/step | plain ms/step | difference |", "|---|---:|---:|---:|"]
    leaf = next(row for row in rows if "(_leaf)" in row)
    cells = [cell.strip() for cell in leaf.strip("|").split("|")]
    assert cells[2] == "0.0" and cells[3].startswith("+")


def test_call_count_adds_up_the_calls_of_matching_functions() -> None:
    profiler = profiled(_caller)
    assert call_count(profiler, "_leaf") == 2
    assert call_count(profiler, "no such function") == 0
