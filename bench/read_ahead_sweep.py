"""`python -m bench.read_ahead_sweep [--batches N ...]`: the loader benchmark at several read-ahead chunk sizes.

Not part of `make bench`: it is how the loader's READ_AHEAD_BATCHES / READ_AHEAD_BYTES were chosen, kept so the
choice can be checked again on another machine. Each size runs the whole `loader_tokens_per_s` benchmark (same
dataset, same rounds of whole chunks) and prints both ratios.
"""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench import data
from bench.machine import REPO
from spec.cli import user_errors
from training.data import loader

DEFAULT_SIZES = (16, 64, 128, 256)


@contextmanager
def read_ahead(batches: int, batch_bytes: int) -> Iterator[None]:
    """Chunks of exactly `batches` batches (the byte cap raised to match) while inside the block."""
    saved = loader.READ_AHEAD_BATCHES, loader.READ_AHEAD_BYTES
    loader.READ_AHEAD_BATCHES, loader.READ_AHEAD_BYTES = batches, batches * batch_bytes
    try:
        yield
    finally:
        loader.READ_AHEAD_BATCHES, loader.READ_AHEAD_BYTES = saved


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.read_ahead_sweep", description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, nargs="+", default=list(DEFAULT_SIZES), help="chunk sizes to try")
    parser.add_argument("--workdir", type=Path, default=REPO / "build" / "bench-read-ahead", help="scratch (emptied)")
    args = parser.parse_args(argv)
    for size in args.batches:
        if size < 1:
            parser.error(f"--batches: {size} must be >= 1")
    return args


@user_errors
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    shutil.rmtree(args.workdir, ignore_errors=True)
    args.workdir.mkdir(parents=True)
    _, _, demo_prefix = data.prepared_demo(args.workdir)
    prefix = data.repeated_dataset(demo_prefix, args.workdir / "loader_text_document", data.BENCH_TOKENS)
    batch_bytes = data.MICRO_BATCH * (data.SEQ_LEN + 1) * 2  # uint16 ids
    print("batches per chunk  MiB  ratio (thread)  ratio (inline)")
    for size in args.batches:
        with read_ahead(size, batch_bytes):
            threaded, inline = data.loader_benchmarks(prefix)
        print(f"{size:17d}  {size * batch_bytes / (1 << 20):3.0f}  {threaded.ratio:14.3f}  {inline.ratio:14.3f}")
    shutil.rmtree(args.workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
