"""`python -m bench [--only NAME ...]`: run the CPU benchmarks, print the table, write docs/benchmarks.{json,md}."""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench.machine import REPO, describe
from bench.report import text_table, write_reports
from bench.result import BenchResult
from spec.cli import user_errors

GROUPS = ("loader", "checkpoint", "trainer_step", "finetune", "prepare", "prepare_memory", "prepare_cluster", "synth")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=GROUPS, help="run only these groups (default: all)")
    parser.add_argument("--workdir", type=Path, default=REPO / "build" / "bench", help="scratch space (emptied)")
    parser.add_argument("--json", type=Path, default=REPO / "docs" / "benchmarks.json")
    parser.add_argument("--markdown", type=Path, default=REPO / "docs" / "benchmarks.md")
    return parser.parse_args(argv)


def _progress(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


def run(groups: tuple[str, ...], workdir: Path) -> list[BenchResult]:
    # Imported here: `--help` and argument errors should not pay for torch and the CDK toolchain.
    from bench import checkpoint, data, data_memory, finetune_step, prepare_cluster, synth, trainer_step

    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    _progress("preparing the demo corpus")
    corpus, tokenizer, demo_prefix = data.prepared_demo(workdir)
    steps: dict[str, Callable[[], list[BenchResult]]] = {
        "loader": lambda: data.loader_benchmarks(
            data.repeated_dataset(demo_prefix, workdir / "loader_text_document", data.BENCH_TOKENS)
        ),
        "checkpoint": lambda: checkpoint.checkpoint_benchmarks(workdir, demo_prefix),
        "trainer_step": lambda: [trainer_step.trainer_step_benchmark(workdir, demo_prefix)],
        "finetune": lambda: [finetune_step.lora_vs_full_benchmark(workdir, demo_prefix)],
        "prepare": lambda: [data.prepare_benchmark(corpus, tokenizer, workdir)],
        "prepare_memory": lambda: [data_memory.write_memory_benchmark(workdir)],
        "prepare_cluster": lambda: [prepare_cluster.sharded_prepare_benchmark(workdir, tokenizer)],
        "synth": lambda: [synth.run()],
    }
    results: list[BenchResult] = []
    for group in groups:
        start = time.perf_counter()
        _progress(f"{group} ...")
        results += steps[group]()
        _progress(f"{group} done in {time.perf_counter() - start:.0f} s")
    shutil.rmtree(workdir, ignore_errors=True)
    return results


def _shown(path: Path) -> str:
    resolved = path.resolve()
    return str(resolved.relative_to(REPO)) if resolved.is_relative_to(REPO) else str(path)


@user_errors
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    start = time.perf_counter()
    machine = describe()
    groups = tuple(args.only) if args.only else GROUPS
    results = run(groups, args.workdir)
    seconds = time.perf_counter() - start
    print(text_table(results))
    print(f"\n{len(results)} figures in {seconds:.0f} s")
    if args.only:
        print("(--only: docs/benchmarks.* left as they were; they hold complete runs only)")
        return 0
    write_reports(results, machine, seconds, args.json, args.markdown)
    print(f"wrote {_shown(args.json)} and {_shown(args.markdown)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
