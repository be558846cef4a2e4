import pytest

from bench.result import BenchResult, best_times, parse_target, ratio


def _result(ratio_value: float, target: str) -> BenchResult:
    return BenchResult("x", 1.0, "u", "base", 1.0, ratio_value, target)


@pytest.mark.parametrize(
    ("ratio_value", "target", "holds"),
    [(0.9, ">= 0.9", True), (0.899, ">= 0.9", False), (1.1, "<= 1.1", True), (1.2, "<= 1.1", False), (5.0, "", None)],
)
def test_holds_compares_the_ratio_with_the_target(ratio_value: float, target: str, holds: bool | None) -> None:
    assert _result(ratio_value, target).holds is holds


def test_as_dict_keeps_the_json_fields_and_drops_the_markdown_details() -> None:
    record = BenchResult("loader", 2.0, "tokens/s", "raw", 4.0, 0.5, ">= 0.9", "note", ["## profile"]).as_dict()
    assert record == {
        "name": "loader",
        "value": 2.0,
        "unit": "tokens/s",
        "baseline_name": "raw",
        "baseline_value": 4.0,
        "ratio": 0.5,
        "target": ">= 0.9",
        "note": "note",
        "holds": False,
    }


@pytest.mark.parametrize("target", ["> 0.9", ">= fast", "0.9", ">= 0.9 0.8"])
def test_a_malformed_target_is_a_one_line_error(target: str) -> None:
    with pytest.raises(ValueError, match=r"^target: .* must be '>= number' or '<= number'$"):
        parse_target(target)


def test_ratio_rounds_and_refuses_an_empty_baseline() -> None:
    assert ratio(1.0, 3.0) == 0.333
    with pytest.raises(ValueError, match=r"baseline: 0 must be > 0"):
        ratio(1.0, 0)


def test_best_times_keeps_each_sides_minimum_and_runs_the_sides_in_turn_reversed_every_other_round() -> None:
    calls: list[str] = []
    samples = {"a": iter([3.0, 1.0, 2.0]), "b": iter([5.0, 6.0, 4.0])}

    def run(name: str) -> float:
        calls.append(name)
        return next(samples[name])

    best = best_times({"a": lambda: run("a"), "b": lambda: run("b")}, rounds=3)
    assert best == {"a": 1.0, "b": 4.0}
    assert calls == ["a", "b", "b", "a", "a", "b"]
    with pytest.raises(ValueError, match=r"rounds: 0 must be >= 1"):
        best_times({"a": lambda: 1.0}, rounds=0)
