"""The two steps of a sharded prepare on the cluster (llm-prepare-cluster submits them; docs/data.md):

    python -m training.prepare_shards shard --plan DIR/plan.json --index I [--workers N] [--progress-every S]
    python -m training.prepare_shards merge --plan DIR/plan.json

`shard` (one array task) prepares shard I of the plan, printing its progress and ETA, unless its manifest is
already complete and verifies. `merge` (the job that runs once every shard succeeded) merges the shards in order
into the dataset one `llm-prepare` over all the inputs would write.
"""

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from spec.cli import OneLineParser, user_errors
from training.data.errors import DataError
from training.data.manifest import sha256_file
from training.data.merge import merge_datasets
from training.data.shard_plan import ShardPlan, incomplete_shards, read_plan, shard_problem
from training.prepare import data_prefix_of, prepare_dataset

DEFAULT_PROGRESS_EVERY_S = 30.0


class ShardProgress:
    """Called with each document's text; every `every_s` seconds prints how far the shard is and its ETA.

    The fraction is characters read over the shard's input bytes: exact for ASCII text files, a little low for
    JSONL (its field names and escapes are bytes that are not text), so the ETA errs long."""

    def __init__(
        self, label: str, input_bytes: int, every_s: float, out: TextIO, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.label = label
        self.input_bytes = max(input_bytes, 1)
        self.every_s = every_s
        self.out = out
        self.clock = clock
        self.started = self.last = clock()
        self.characters = 0
        self.documents = 0

    def __call__(self, text: str) -> None:
        self.characters += len(text)
        self.documents += 1
        now = self.clock()
        if now - self.last >= self.every_s:
            self.last = now
            print(self.line(now), file=self.out, flush=True)

    def line(self, now: float) -> str:
        elapsed = max(now - self.started, 1e-9)
        fraction = min(self.characters / self.input_bytes, 0.99)  # 100 % is printed when the shard is written
        rate = self.characters / elapsed
        eta = elapsed * (1 - fraction) / fraction if fraction > 0 else None
        return (
            f"{self.label}: {fraction:.0%} of {self.input_bytes / 1e6:,.1f} MB read, {self.documents:,} documents, "
            f"{rate / 1e6:,.2f} MB/s, ETA {_duration(eta) if eta is not None else 'unknown'}"
        )


def _duration(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


def prepare_shard(
    plan: ShardPlan,
    index: int,
    *,
    workers: int = 1,
    progress_every_s: float = DEFAULT_PROGRESS_EVERY_S,
    out: TextIO = sys.stdout,
) -> bool:
    """Prepares shard `index` unless it is already complete; True when it was prepared now."""
    if not 0 <= index < len(plan.shards):
        raise DataError(f"--index: {index} is not a shard of {plan.directory} (0 to {len(plan.shards) - 1})")
    label = plan.describe(index)
    if shard_problem(plan, index) is None:
        print(f"{label}: complete (its manifest verifies), not prepared again", file=out, flush=True)
        return False
    if sha256_file(plan.tokenizer) != plan.tokenizer_sha256:
        raise DataError(
            f"{plan.tokenizer}: changed since the plan was written (tokenizer_sha256); shards must share it"
        )
    files = [Path(item.path) for item in plan.shards[index]]
    progress = ShardProgress(label, sum(item.size for item in plan.shards[index]), progress_every_s, out)
    print(f"{label}: preparing in process {os.getpid()}", file=out, flush=True)
    print(progress.line(progress.started), file=out, flush=True)
    prepared = prepare_dataset(
        files,
        plan.shard_output_prefix(index),
        tokenizer_path=plan.tokenizer,
        text_field=plan.text_field,
        workers=workers,
        eod_token=plan.eod_token,
        show_progress=False,
        on_document=progress,
    )
    elapsed = time.monotonic() - progress.started
    print(
        f"{label}: 100% done in {_duration(elapsed)}: {prepared.manifest.document_count:,} documents, "
        f"{prepared.manifest.token_count:,} tokens in {prepared.data_prefix}",
        file=out,
        flush=True,
    )
    return True


def merge_plan(plan: ShardPlan, out: TextIO = sys.stdout) -> Path:
    """Merges every shard into `<output prefix>_text_document`; refuses while any shard is incomplete."""
    missing = incomplete_shards(plan)
    if missing:
        first = min(missing)
        raise DataError(
            f"{plan.describe(first)}: {missing[first]} ({len(missing)} of {len(plan.shards)} shards incomplete); "
            "the merge needs every shard: submit the same llm-prepare-cluster command again"
        )
    output = data_prefix_of(plan.output_prefix)
    print(f"merging {len(plan.shards)} shards of {plan.directory} into {output}", file=out, flush=True)
    manifest = merge_datasets([plan.shard_prefix(index) for index in range(len(plan.shards))], output)
    print(
        f"wrote {output}.{{bin,idx,manifest.json}}: {manifest.document_count:,} documents, "
        f"{manifest.token_count:,} tokens ({manifest.dtype}); the shards in {plan.directory} can go",
        file=out,
        flush=True,
    )
    return output


def status_lines(plan: ShardPlan) -> list[str]:
    """What llm-follow prints when a sharded prepare's job ends: the merged dataset, or each incomplete shard
    named with why (a task that died leaves its shard without a manifest)."""
    missing = incomplete_shards(plan)
    output = data_prefix_of(plan.output_prefix)
    lines = [f"shards          {len(plan.shards) - len(missing)} of {len(plan.shards)} complete in {plan.directory}"]
    lines += [f"error: {plan.describe(index)}: {problem}" for index, problem in sorted(missing.items())]
    if missing:
        lines.append("submit the same llm-prepare-cluster command again: only these shards are prepared again")
    elif Path(f"{output}.manifest.json").is_file():
        lines.append(f"dataset         {output} (--data-prefix)")
    return lines


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m training.prepare_shards", description=__doc__.splitlines()[0])
    steps = parser.add_subparsers(dest="step", required=True)
    shard = steps.add_parser("shard", help="prepare one shard of the plan")
    shard.add_argument("--plan", required=True, type=Path)
    shard.add_argument("--index", required=True, type=int)
    shard.add_argument("--workers", type=int, default=1)
    shard.add_argument("--progress-every", type=float, default=DEFAULT_PROGRESS_EVERY_S, metavar="SECONDS")
    merge = steps.add_parser("merge", help="merge every shard of the plan into one dataset")
    merge.add_argument("--plan", required=True, type=Path)
    return parser


@user_errors
def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    plan = read_plan(args.plan)
    if args.step == "shard":
        prepare_shard(plan, args.index, workers=args.workers, progress_every_s=args.progress_every)
    else:
        merge_plan(plan)
    return 0


if __name__ == "__main__":
    sys.exit(main())
