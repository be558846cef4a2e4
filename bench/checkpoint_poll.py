"""`python -m bench.checkpoint_poll [--ranks N] [--polls N]`: what the per-step poll of a pending async save costs.

While an async save is pending, CheckpointManager.poll makes every rank agree, in one one-integer gloo all-reduce,
whether every rank's background write is done (training/checkpoint/manager.py). Here N local gloo ranks poll a save
that never finishes, so every poll pays that collective, and print its median and 99th percentile per poll.
Without a pending save the poll is an attribute test and costs nothing measurable.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from concurrent.futures import Future
from pathlib import Path

import torch.distributed as dist
import torch.multiprocessing as mp

from spec.cli import OneLineParser, user_errors
from training.checkpoint.manager import CheckpointManager, _PendingSave
from training.config import CheckpointSection


def _rank(rank: int, world: int, polls: int, store_dir: str, out: str) -> None:
    os.environ["OMP_NUM_THREADS"] = "1"
    store = dist.FileStore(str(Path(store_dir) / "store"), world)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
    manager = CheckpointManager(Path(store_dir) / "ckpt", CheckpointSection(async_save=True), rank, world, 1)
    manager._pending = _PendingSave(step=1, future=Future(), started=time.monotonic())  # a write that never ends
    seconds = []
    for _ in range(polls):
        start = time.perf_counter()
        assert manager.poll() is None
        seconds.append(time.perf_counter() - start)
    if rank == 0:
        seconds.sort()
        median, p99 = statistics.median(seconds), seconds[int(0.99 * len(seconds))]
        Path(out).write_text(f"{median * 1e6:.0f} {p99 * 1e6:.0f}")
    manager._pending = None
    dist.destroy_process_group()


@user_errors
def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m bench.checkpoint_poll", description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--polls", type=int, default=2000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        out = str(Path(scratch) / "result")
        mp.spawn(_rank, args=(args.ranks, args.polls, scratch, out), nprocs=args.ranks)
        median_us, p99_us = Path(out).read_text().split()
    print(f"poll of a pending async save, {args.ranks} gloo ranks, {args.polls} polls: median {median_us} us, "
          f"p99 {p99_us} us per step")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
