"""llm-report: planned dollars next to what the jobs really used, from Slurm accounting (sacct).

    python -m planner.report [--spec SPEC] [--by job|user|month] [--start 2026-01-01] [--end ...]
                              [--sacct-file FILE] [--price PARTITION=USD] [--json] [--run-dir RUN ...]

GPU-hours: each job's allocated GPUs (sacct's AllocTRES gres/gpu, with AccountingStorageTRES=gres/gpu) x elapsed
hours; "-" where sacct reports no GPU count (a CPU job, or output without AllocTRES).
Spent: each job's allocated nodes x elapsed hours (sacct's AllocNodes, ElapsedRaw) x the hourly price of its
partition's instance type (a queue of the spec's cluster; the spec's cluster.prices, else the on-demand
facts table; --price for partitions outside the spec, such as the local cluster's). Planned: the plan
launch.submit records in the job's comment (`llm-plan:v1,backend=...,usd=...,hours=...,steps=...`, stored by
AccountingStoreFlags=job_comment, read back as sacct's Comment). A job without a plan shows its spend only.
Reads `sacct --parsable2` itself on the head node, or a file of its output (--sacct-file, `-` for stdin).
With --run-dir, a line per run with its latest llm-eval scores (planner.eval_scores).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from planner.comment import Plan, parse_plan
from planner.eval_scores import latest_scores_line
from slurm.backends import BACKENDS
from slurm.submission import load_command_spec
from spec.cli import OneLineParser, user_errors
from spec.cli_types import finite_float
from spec.errors import UserError

# The fields the report reads; Comment last, since a free-text comment may itself hold '|'.
SACCT_FIELDS: tuple[str, ...] = (
    "JobID",
    "JobName",
    "User",
    "Account",
    "Partition",
    "AllocNodes",
    "ElapsedRaw",
    "Start",
    "End",
    "State",
    "ExitCode",
    "AllocTRES",
    "Comment",
)
# Older recordings (before GPU-hours) lack it: their jobs report no GPU-hours rather than failing.
OPTIONAL_FIELDS: frozenset[str] = frozenset({"AllocTRES"})
GPU_TRES = "gres/gpu"
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2})?)?$")


class ReportError(UserError):
    """Bad input to the report; one line naming the option (or sacct line) and the value."""


@dataclass(frozen=True)
class JobRecord:
    job_id: str
    name: str
    user: str
    account: str
    partition: str
    nodes: int
    elapsed_s: int
    start: str  # ISO time, or "" for a job that never started
    state: str
    exit_code: str
    plan: Plan | None
    gpus: int | None = None  # AllocTRES gres/gpu; None: sacct named no GPUs

    @property
    def node_hours(self) -> float:
        return self.nodes * self.elapsed_s / 3600

    @property
    def gpu_hours(self) -> float | None:
        return None if self.gpus is None else self.gpus * self.elapsed_s / 3600

    @property
    def month(self) -> str:
        return self.start[:7] if self.start else "not started"


def parse_sacct(text: str) -> list[JobRecord]:
    """`sacct --parsable2 --format=<SACCT_FIELDS>` output (header line first) -> one record per job."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    header = lines[0].split("|")
    missing = [name for name in SACCT_FIELDS if name not in header and name not in OPTIONAL_FIELDS]
    if missing:
        raise ReportError(f"sacct output: header lacks {', '.join(missing)} (run sacct --parsable2 with the header)")
    comment_at = header.index("Comment")
    records = []
    for number, line in enumerate(lines[1:], start=2):
        cells = line.split("|")
        if len(cells) < len(header):
            raise ReportError(f"sacct output line {number}: {len(cells)} fields, header has {len(header)}: {line!r}")
        # A comment containing '|' spills into extra cells: join them back.
        extra = len(cells) - len(header)
        cells[comment_at : comment_at + extra + 1] = ["|".join(cells[comment_at : comment_at + extra + 1])]
        row = dict(zip(header, cells, strict=True))
        if "." in row["JobID"]:  # a step (batch, extern, 0, ...): the allocation line already counts it
            continue
        try:
            nodes, elapsed = int(row["AllocNodes"] or 0), int(row["ElapsedRaw"] or 0)
        except ValueError:
            raise ReportError(f"sacct output line {number}: AllocNodes/ElapsedRaw are not numbers: {line!r}") from None
        start = row["Start"] if row["Start"] not in ("", "None", "Unknown") else ""
        records.append(
            JobRecord(
                job_id=row["JobID"],
                name=row["JobName"],
                user=row["User"],
                account=row["Account"],
                partition=row["Partition"],
                nodes=nodes,
                elapsed_s=elapsed,
                start=start,
                state=row["State"].split()[0] if row["State"] else "",
                exit_code=row["ExitCode"],
                plan=parse_plan(row["Comment"]),
                gpus=allocated_gpus(row.get("AllocTRES", ""), number),
            )
        )
    return records


def allocated_gpus(tres: str, line_number: int) -> int | None:
    """The untyped gres/gpu count of an AllocTRES value (`billing=2,cpu=2,gres/gpu=4,node=2`); None without one.
    Typed entries (`gres/gpu:h100=8`) repeat the untyped count and are not added."""
    for item in tres.split(","):
        name, _, value = item.partition("=")
        if name == GPU_TRES:
            if not value.isdigit():
                raise ReportError(f"sacct output line {line_number}: AllocTRES {GPU_TRES}={value!r} is not a count")
            return int(value)
    return None


def run_sacct(start: str, end: str | None) -> str:
    command = [
        "sacct",
        "--parsable2",
        "--allusers",
        "--allocations",
        f"--starttime={start}",
        f"--format={','.join(SACCT_FIELDS)}",
    ]
    if end:
        command.append(f"--endtime={end}")
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    except FileNotFoundError:
        raise ReportError("sacct: not found; run this on the head node, or pass --sacct-file") from None
    if result.returncode != 0:
        message = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:] or ["no output"]
        raise ReportError(f"sacct failed ({result.returncode}): {message[0]}")
    return result.stdout


def partition_prices(spec: Any, overrides: Mapping[str, float]) -> dict[str, float]:
    """USD per node-hour by partition: each spec queue's instance price, then the --price overrides."""
    from spec.platform.instances import on_demand_usd_per_hour

    prices: dict[str, float] = {}
    if spec is not None and spec.cluster is not None:
        for queue in spec.cluster.queues:
            prices[queue.name] = on_demand_usd_per_hour(queue.instance_type, spec.cluster.prices)
    prices.update(overrides)
    return prices


@dataclass(frozen=True)
class Row:
    key: str  # job id, user or month
    jobs: int
    node_hours: float
    gpu_hours: float | None  # None: no job of the row reported GPUs
    spent_usd: float | None  # None: a partition with no known price
    planned_usd: float | None  # None: no job of the row carries a plan
    planned_hours: float | None
    detail: str = ""  # per job: user, account, partition, nodes, state, exit code

    @property
    def spent_of_planned(self) -> float | None:
        if self.planned_usd is None or self.spent_usd is None or self.planned_usd <= 0:
            return None
        return self.spent_usd / self.planned_usd


def _spent(record: JobRecord, prices: Mapping[str, float]) -> float | None:
    price = prices.get(record.partition)
    return None if price is None else record.node_hours * price


def _sum(values: Iterable[float | None]) -> float | None:
    known = [value for value in values if value is not None]
    return sum(known) if known else None


def _backend_words(name: str) -> str:
    """`bridge (Megatron Bridge)`: which backend ran; an older comment's name (nemo: either framework) as it is."""
    backend = BACKENDS.get(name)
    return f"{name} ({backend.title})" if backend is not None else name


def summarize(records: Sequence[JobRecord], prices: Mapping[str, float], by: str) -> list[Row]:
    if by == "job":
        return [
            Row(
                key=r.job_id,
                jobs=1,
                node_hours=r.node_hours,
                gpu_hours=r.gpu_hours,
                spent_usd=_spent(r, prices),
                planned_usd=r.plan.usd if r.plan else None,
                planned_hours=r.plan.hours if r.plan else None,
                detail=f"{r.name} {r.user}/{r.account} {r.partition} x{r.nodes} {r.state} {r.exit_code}"
                + (f" planned as {_backend_words(r.plan.backend)}" if r.plan and r.plan.backend else ""),
            )
            for r in records
        ]
    groups: dict[str, list[JobRecord]] = {}
    for record in records:
        groups.setdefault(record.user if by == "user" else record.month, []).append(record)
    return [
        Row(
            key=key,
            jobs=len(group),
            node_hours=sum(r.node_hours for r in group),
            gpu_hours=_sum(r.gpu_hours for r in group),
            spent_usd=_sum(_spent(r, prices) for r in group),
            planned_usd=_sum(r.plan.usd for r in group if r.plan),
            planned_hours=_sum(r.plan.hours for r in group if r.plan),
        )
        for key, group in sorted(groups.items())
    ]


def _money(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"


def _hours(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"


def render_table(rows: Sequence[Row], by: str) -> str:
    header = [by, "jobs", "node-hours", "GPU-hours", "spent USD", "planned USD", "spent/planned"]
    if by == "job":
        header.append("job")
    lines = [header]
    for row in rows:
        ratio = row.spent_of_planned
        line = [
            row.key,
            str(row.jobs),
            f"{row.node_hours:,.2f}",
            _hours(row.gpu_hours),
            _money(row.spent_usd),
            _money(row.planned_usd),
            "-" if ratio is None else f"{ratio:.0%}",
        ]
        if by == "job":
            line.append(row.detail)
        lines.append(line)
    total_spent = _sum(row.spent_usd for row in rows)
    total_planned = _sum(row.planned_usd for row in rows)
    lines.append(
        ["total", str(sum(r.jobs for r in rows)), f"{sum(r.node_hours for r in rows):,.2f}",
         _hours(_sum(r.gpu_hours for r in rows)), _money(total_spent), _money(total_planned), "",
         *([""] if by == "job" else [])]
    )  # fmt: skip
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip() for line in lines
    )


def _price_override(text: str) -> tuple[str, float]:
    partition, _, value = text.partition("=")
    try:
        price = finite_float(value)
    except argparse.ArgumentTypeError:
        raise ReportError(f"--price: {text!r} must be PARTITION=USD_PER_NODE_HOUR, such as local=0.50") from None
    if not partition or price < 0:
        raise ReportError(f"--price: {text!r} must be PARTITION=USD_PER_NODE_HOUR with a price of 0 or more")
    return partition, price


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="llm-report",
        description="Planned dollars next to measured job hours from Slurm accounting (sacct), per job, user or month.",
    )
    parser.add_argument("--spec", type=Path, help="deployment spec (default: $LLM_TRAINING_SPEC, else the default)")
    parser.add_argument("--by", choices=("job", "user", "month"), default="job")
    parser.add_argument("--start", default="now-30days", help="sacct --starttime (default now-30days)")
    parser.add_argument("--end", help="sacct --endtime")
    parser.add_argument("--sacct-file", type=Path, help="read sacct --parsable2 output from FILE ('-': stdin)")
    parser.add_argument(
        "--price", action="append", default=[], metavar="PARTITION=USD", help="USD per node-hour for a partition"
    )
    parser.add_argument("--json", action="store_true", help="rows as JSON")
    parser.add_argument(
        "--run-dir",
        dest="run_dirs",
        action="append",
        default=[],
        type=Path,
        help="also print the run's latest llm-eval scores (repeatable)",
    )
    return parser


@user_errors
def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    if args.start != "now-30days" and not _DATE_RE.match(args.start) and not args.start.startswith("now-"):
        raise ReportError(f"--start: {args.start!r} must be YYYY-MM-DD[THH:MM[:SS]] or now-<N>days")
    overrides = dict(_price_override(text) for text in args.price)
    spec = load_command_spec(args.spec, ReportError)
    if args.sacct_file is not None:
        if str(args.sacct_file) == "-":
            text = sys.stdin.read()
        else:
            try:
                text = args.sacct_file.read_text(encoding="utf-8")
            except OSError as error:
                raise ReportError(f"--sacct-file: {str(args.sacct_file)!r}: {error.strerror}") from None
            except UnicodeDecodeError as error:
                raise ReportError(
                    f"--sacct-file: {str(args.sacct_file)!r} is not UTF-8 text (byte {error.start})"
                ) from None
    else:
        text = run_sacct(args.start, args.end)
    records = parse_sacct(text)
    prices = partition_prices(spec, overrides)
    rows = summarize(records, prices, args.by)
    if args.json:
        print(json.dumps([{**asdict(row), "spent_of_planned": row.spent_of_planned} for row in rows], indent=1))
    else:
        print(render_table(rows, args.by))
        unpriced = sorted({r.partition for r in records if r.partition not in prices})
        if unpriced:
            print(f"no price for partition {', '.join(unpriced)}: pass --price PARTITION=USD", file=sys.stderr)
        for run_dir in args.run_dirs:
            print(latest_scores_line(run_dir))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
