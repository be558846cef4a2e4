"""Reading what the collective benchmarks print: nccl-tests' all_reduce_perf and Neuron's nccom-test.

Both print one row per message size with a bus bandwidth; nccl-tests in GB/s (10^9 bytes), nccom-test in GiB/s
(its guide: "gibibytes per second"). Results here are always GB/s.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass

from cluster.fabric.thresholds import GIB

NCCL_TESTS = "all_reduce_perf"
NCCOM_TEST = "nccom-test"
# Bus bandwidth approaches line rate only for large messages; the verdict reads the largest sizes measured.
LARGE_SIZES = 3
MIN_LARGEST_SIZE = GIB

_NCCL_HEADER_RE = re.compile(
    r"^# nThread (\d+) nGpus (\d+) minBytes (\d+) maxBytes (\d+) step: \S+ warmup iters: (\d+) iters: (\d+) "
    r"agg iters: (\d+) validation: (\d+)"
)
_NCCL_RANK_RE = re.compile(r"^#\s+Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device")
_NCCL_AVG_RE = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")
_NCCL_BOUNDS_RE = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)")
_NCCL_FAILURE_RE = re.compile(r"Test (?:NCCL |CUDA )?failure|Test failure|NCCL error|Data corruption")
_NCCOM_AVG_RE = re.compile(r"^\s*Avg bus bandwidth:\s*([0-9.eE+-]+)\s*GB/s")
_NCCOM_FAILURE_RE = re.compile(r"Failure running|\d+ errors? found|test failed|is not running")


@dataclass(frozen=True)
class SizeResult:
    size_bytes: int
    busbw_gb_per_s: tuple[float, ...]  # nccl-tests: out-of-place, in-place; nccom-test: one value
    wrong: int = 0  # elements that failed validation (nccl-tests #wrong, summed over placements)


@dataclass(frozen=True)
class CollectiveRun:
    tool: str
    sizes: tuple[SizeResult, ...]
    avg_busbw_gb_per_s: float | None  # the tool's own average over every row (None: summary line missing)
    ranks: int | None = None
    hosts: tuple[str, ...] = ()
    timed_iterations: int | None = None  # per size and placement (nccl-tests: iters x agg iters)
    out_of_bounds: int | None = None
    failures: tuple[str, ...] = ()  # error lines the tool printed

    @property
    def complete(self) -> bool:
        return self.avg_busbw_gb_per_s is not None

    @property
    def placements(self) -> int:
        return len(self.sizes[0].busbw_gb_per_s) if self.sizes else 0

    def largest(self, count: int = LARGE_SIZES) -> tuple[SizeResult, ...]:
        return tuple(sorted(self.sizes, key=lambda row: row.size_bytes)[-count:])

    def large_message_busbw(self, count: int = LARGE_SIZES) -> float:
        """Median busbw over the largest `count` sizes, both placements: one slow size does not decide."""
        values = [value for row in self.largest(count) for value in row.busbw_gb_per_s]
        if not values:
            raise ValueError(f"{self.tool} output has no result rows")
        return statistics.median(values)


def format_bytes(size: int | float) -> str:
    """8 B, 512 KiB, 16 GiB, 640.0 GiB (binary units; whole numbers stay whole)."""
    for unit, scale in (("TiB", 1 << 40), ("GiB", GIB), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            value = size / scale
            return f"{value:.0f} {unit}" if value == int(value) and value < 10_000 else f"{value:.1f} {unit}"
    return f"{size:.0f} B"


def parse_all_reduce_perf(text: str) -> CollectiveRun:
    """all_reduce_perf's stdout: the header, the out-of-place/in-place table, and the summary lines."""
    sizes: list[SizeResult] = []
    hosts: list[str] = []
    ranks = 0
    iterations: int | None = None
    avg: float | None = None
    bounds: int | None = None
    failures: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if match := _NCCL_HEADER_RE.match(line):
            iterations = int(match.group(6)) * int(match.group(7))
        elif match := _NCCL_RANK_RE.match(line):
            ranks += 1
            if match.group(2) not in hosts:
                hosts.append(match.group(2))
        elif match := _NCCL_AVG_RE.match(line):
            avg = float(match.group(1))
        elif match := _NCCL_BOUNDS_RE.match(line):
            bounds = int(match.group(1))
        elif _NCCL_FAILURE_RE.search(line):
            failures.append(line)
        elif row := _nccl_row(line):
            sizes.append(row)
    return CollectiveRun(
        tool=NCCL_TESTS,
        sizes=tuple(sizes),
        avg_busbw_gb_per_s=avg,
        ranks=ranks or None,
        hosts=tuple(hosts),
        timed_iterations=iterations,
        out_of_bounds=bounds,
        failures=tuple(failures),
    )


def _nccl_row(line: str) -> SizeResult | None:
    """`size count type redop root time algbw busbw #wrong time algbw busbw #wrong`, or None for other lines."""
    tokens = line.split()
    if len(tokens) != 13 or not (tokens[0].isdigit() and tokens[1].isdigit()):
        return None
    try:
        busbw = (float(tokens[7]), float(tokens[11]))
    except ValueError:
        return None
    wrong = sum(int(float(token)) for token in (tokens[8], tokens[12]) if token != "N/A")
    return SizeResult(int(tokens[0]), busbw, wrong)


def parse_nccom_test(text: str) -> CollectiveRun:
    """nccom-test's table (columns found by their header names) and its 'Avg bus bandwidth' line."""
    columns: list[str] = []
    sizes: list[SizeResult] = []
    avg: float | None = None
    failures: list[str] = []
    gib_to_gb = GIB / 1e9
    for raw in text.splitlines():
        line = raw.strip()
        tokens = line.split()
        if "size(B)" in tokens and "busbw(GB/s)" in tokens:
            columns = tokens
        elif match := _NCCOM_AVG_RE.match(line):
            avg = float(match.group(1)) * gib_to_gb
        elif _NCCOM_FAILURE_RE.search(line):
            failures.append(line)
        elif columns and len(tokens) == len(columns) and tokens[0].isdigit():
            try:
                busbw = float(tokens[columns.index("busbw(GB/s)")]) * gib_to_gb
            except ValueError:
                continue
            sizes.append(SizeResult(int(tokens[0]), (busbw,)))
    return CollectiveRun(tool=NCCOM_TEST, sizes=tuple(sizes), avg_busbw_gb_per_s=avg, failures=tuple(failures))


PARSERS = {NCCL_TESTS: parse_all_reduce_perf, NCCOM_TEST: parse_nccom_test}
