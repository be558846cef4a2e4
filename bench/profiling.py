"""cProfile summaries for docs/benchmarks.md: the summary line, the column header and the top rows."""

from __future__ import annotations

import cProfile
import io
import pstats
from collections.abc import Callable
from pathlib import Path


def profile_top(run: Callable[[], object], count: int, sort: str = "tottime") -> list[str]:
    """cProfile of one call of `run`."""
    return top_rows(profiled(run), count, sort)


def top_rows(profiler: cProfile.Profile, count: int, sort: str = "tottime") -> list[str]:
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).strip_dirs().sort_stats(sort).print_stats(count)
    return summarize(out.getvalue(), count)


def summarize(report: str, count: int) -> list[str]:
    """pstats text trimmed to 'N function calls ... in S seconds', the column header and `count` rows."""
    lines = [line.rstrip() for line in report.splitlines() if line.strip()]
    summary = next((line.strip() for line in lines if "function calls" in line), "")
    header = next((i for i, line in enumerate(lines) if line.lstrip().startswith("ncalls")), None)
    if header is None:
        return [summary] if summary else []
    return [summary, *lines[header : header + 1 + count]]


def profiled(run: Callable[[], object]) -> cProfile.Profile:
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        run()
    finally:
        profiler.disable()
    return profiler


def cumulative_seconds(profiler: cProfile.Profile, file_name: str, function: str) -> float:
    """Time spent inside `function` of `file_name` (base name) and everything it called, over all its calls."""
    entries = pstats.Stats(profiler).stats.items()  # type: ignore[attr-defined]
    return sum(
        cumulative
        for (path, _, name), (_, _, _, cumulative, _) in entries
        if name == function and Path(path).name == file_name
    )


def own_seconds(profiler: cProfile.Profile, name_part: str) -> float:
    """Own time (callees excluded) of every function whose name contains `name_part`, e.g. "posix.fsync"."""
    entries = pstats.Stats(profiler).stats.items()  # type: ignore[attr-defined]
    return sum(own for (_, _, name), (_, _, own, _, _) in entries if name_part in name)


def own_time_difference(ours: cProfile.Profile, baseline: cProfile.Profile, runs: int, count: int) -> list[str]:
    """Markdown rows of the functions whose own time per run grew the most from `baseline` to `ours`."""

    def per_function(profiler: cProfile.Profile) -> dict[str, float]:
        totals: dict[str, float] = {}
        for (path, line, name), (_, _, own, _, _) in pstats.Stats(profiler).stats.items():  # type: ignore[attr-defined]
            key = name if path == "~" else f"{Path(path).name}:{line}({name})"
            totals[key] = totals.get(key, 0.0) + own / runs
        return totals

    ours_times, baseline_times = per_function(ours), per_function(baseline)
    grown = sorted(ours_times, key=lambda key: baseline_times.get(key, 0.0) - ours_times[key])[:count]
    rows = ["| function | ours ms/step | plain ms/step | difference |", "|---|---:|---:|---:|"]
    for key in grown:
        mine, theirs = ours_times[key] * 1e3, baseline_times.get(key, 0.0) * 1e3
        rows.append(f"| `{key}` | {mine:.1f} | {theirs:.1f} | {mine - theirs:+.1f} |")
    return rows


def call_count(profiler: cProfile.Profile, name_part: str) -> int:
    """Calls of every function whose name contains `name_part`."""
    entries = pstats.Stats(profiler).stats.items()  # type: ignore[attr-defined]
    return sum(calls for (_, _, name), (_, calls, _, _, _) in entries if name_part in name)
