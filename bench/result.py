"""One benchmark figure and the baseline it is judged against."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class BenchResult:
    name: str
    value: float
    unit: str
    baseline_name: str
    baseline_value: float
    # ratio = value / baseline for throughputs ("higher is better"); for times, the bench says which way round.
    ratio: float
    target: str = ""
    note: str = ""

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def best_of(repeats: int, run: Callable[[], float]) -> float:
    """The best of `repeats` measurements: on a shared machine, noise only ever adds time."""
    return max(run() for _ in range(repeats))


def median_seconds(repeats: int, run: Callable[[], None]) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
