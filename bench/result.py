"""One benchmark figure, the baseline it is judged against, and the measuring helpers every benchmark uses."""

from __future__ import annotations

import operator
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

_COMPARISONS: dict[str, Callable[[float, float], bool]] = {">=": operator.ge, "<=": operator.le}


@dataclass(frozen=True)
class BenchResult:
    name: str
    value: float
    unit: str
    baseline_name: str
    baseline_value: float
    # value / baseline for throughputs (higher is better); for times the benchmark says which way round.
    ratio: float
    target: str = ""  # ">= 0.9", "<= 1.1" on the ratio, or "" for a figure without a target
    note: str = ""
    # Markdown for docs/benchmarks.md: what each side does, and a profile where the target does not hold.
    details: list[str] = field(default_factory=list, compare=False)

    @property
    def holds(self) -> bool | None:
        """Whether the ratio meets the target; None without a target."""
        if not self.target:
            return None
        comparison, threshold = parse_target(self.target)
        return _COMPARISONS[comparison](self.ratio, threshold)

    def as_dict(self) -> dict[str, object]:
        record = asdict(self)
        record.pop("details")
        record["holds"] = self.holds
        return record


def parse_target(target: str) -> tuple[str, float]:
    """'>= 0.9' -> ('>=', 0.9); anything else is a one-line ValueError naming the text."""
    parts = target.split()
    if len(parts) != 2 or parts[0] not in _COMPARISONS:
        raise ValueError(f"target: {target!r} must be '>= number' or '<= number'")
    try:
        return parts[0], float(parts[1])
    except ValueError:
        raise ValueError(f"target: {target!r} must be '>= number' or '<= number'") from None


def ratio(value: float, baseline: float) -> float:
    if baseline <= 0:
        raise ValueError(f"baseline: {baseline!r} must be > 0 to form a ratio")
    return round(value / baseline, 3)


def timed(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def best_times(runs: dict[str, Callable[[], float]], rounds: int) -> dict[str, float]:
    """The shortest of `rounds` timings of each run, the runs taken in turn within every round, in reverse order
    every other round.

    On a shared machine noise only ever adds time, so the minimum is the best estimate of each side's cost;
    alternating the sides spreads slow periods over both instead of penalising whichever ran during one, and
    reversing the order lets no side always profit (or suffer) from what the one before it left in the caches.
    Each run returns the seconds of the work it timed (so it can leave its own setup out).
    """
    if rounds < 1:
        raise ValueError(f"rounds: {rounds!r} must be >= 1")
    best = {name: float("inf") for name in runs}
    order = list(runs)
    for round_number in range(rounds):
        for name in order if round_number % 2 == 0 else reversed(order):
            best[name] = min(best[name], runs[name]())
    return best
