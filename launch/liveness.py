"""Which rank stopped answering, for a trainer whose code we do not own (NxDT on Trainium).

The FSDP trainer has its own hang watchdog (training/watchdog.py) and NeMo jobs have torch's flight recorder. NxDT
has neither: a stuck peer only makes the Neuron runtime fail every live rank's execution after
`neuron_rt_exec_timeout` (NxDT's training_orchestrator.py exports it as NEURON_RT_EXEC_TIMEOUT), and the job would
requeue as an ordinary failure, possibly onto the same node. So torchrun starts each rank through this file:

- `run` beats a heartbeat (the mtime of RUN_DIR/hang/alive-rank-<rank>, whose content names the rank's node) from
  a thread every INTERVAL seconds, then runs the trainer's script as `python SCRIPT ARGS` would. torch_xla waits for
  the device without the GIL (`NoGilSection` around `_xla_step_marker`, `_xla_sync_multi` and
  `_xla_wait_device_ops` in torch_xla/csrc/init_python_bindings.cpp), so a rank blocked in a collective keeps
  beating; a stopped process, a frozen host or a node cut off from the file system does not.
- The first rank whose script fails takes RUN_DIR/hang/first-failure (O_EXCL, so one rank in the whole job reads
  the heartbeats, not every rank at once) and records every rank's heartbeat age at that moment, before Slurm and
  torchrun tear the step down (the teardown's SIGCONT could wake a stopped rank). Each failing rank writes its
  traceback, all threads, to rank-<rank>.traceback; a live rank torchrun or Slurm ends with TERM dumps its stack
  there too (faulthandler, chained to the default action).
- After the step failed, the job script runs `suspects`: the ranks whose heartbeat was older than STALE_AFTER when
  the first rank failed are the silent ones; their nodes go to hang/suspect_nodes (as the FSDP watchdog writes
  them), which launch/jobs/common.sh has drained before the requeue. A failure where every rank was still beating
  is an ordinary crash: no suspect, exit 1.

Run by path with the Neuron venv's python on the nodes and the release's on the batch host: stdlib only.

    torchrun ... liveness.py run --dir RUN_DIR/hang --interval 5 --stale-after 25 -- SCRIPT [ARGS...]
    python liveness.py suspects --dir RUN_DIR/hang --nodes "n1 n2"   # exit 0: prints the reason
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import json
import os
import runpy
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

FIRST_FAILURE_FILE = "first-failure"
SUSPECT_NODES_FILE = "suspect_nodes"  # the name training/watchdog.py writes and common.sh drain_hung_nodes reads


def heartbeat_bounds(exec_timeout_s: int) -> tuple[int, int]:
    """(beat interval, staleness bound) for a runtime that fails a stuck execution after exec_timeout_s: a rank
    silent for a quarter of it is stopped, not slow (a live rank misses at most a beat or two), and the bound stays
    well under the timeout, so the peers' failure always finds the stopped rank stale. Lustre sees one utime per
    rank per interval: 2,048 ranks at the default 100 s timeout (5 s) make about 400 metadata operations a second."""
    stale = max(3, exec_timeout_s // 4)
    return max(1, stale // 5), stale


def _alive_file(directory: Path, rank: int) -> Path:
    return directory / f"alive-rank-{rank}"


def _node_name() -> str:
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


class _Heartbeat(threading.Thread):
    def __init__(self, path: Path, interval_s: float) -> None:
        super().__init__(name="liveness-heartbeat", daemon=True)
        self.path, self.interval_s = path, interval_s

    def run(self) -> None:
        while True:
            with contextlib.suppress(OSError):  # the file system is away: the beat is missed, which is the point
                os.utime(self.path)
            time.sleep(self.interval_s)


def _heartbeat_ages(directory: Path, world_size: int, now: float) -> dict[str, float | None]:
    ages: dict[str, float | None] = {}
    for rank in range(world_size):
        try:
            ages[str(rank)] = round(now - _alive_file(directory, rank).stat().st_mtime, 3)
        except OSError:
            ages[str(rank)] = None  # never started, or its file is gone: as silent as a stopped rank
    return ages


def _record_failure(directory: Path, rank: int, world_size: int, stale_after_s: float, error: str) -> None:
    with (directory / f"rank-{rank}.traceback").open("a", encoding="utf-8") as traces:
        traces.write(error)
        faulthandler.dump_traceback(file=traces, all_threads=True)
    try:
        descriptor = os.open(directory / FIRST_FAILURE_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return  # another rank failed first and took the snapshot
    now = time.time()
    record = {
        "rank": rank,
        "node": _node_name(),
        "at": now,
        "world_size": world_size,
        "stale_after_s": stale_after_s,
        "error": error.strip().splitlines()[-1][:300] if error.strip() else "",
        "heartbeat_ages_s": _heartbeat_ages(directory, world_size, now),
    }
    with os.fdopen(descriptor, "w", encoding="utf-8") as snapshot:
        snapshot.write(json.dumps(record) + "\n")


def run(directory: Path, interval_s: float, stale_after_s: float, script: str, script_args: Sequence[str]) -> int:
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    directory.mkdir(parents=True, exist_ok=True)
    alive = _alive_file(directory, rank)
    alive.write_text(json.dumps({"rank": rank, "node": _node_name(), "pid": os.getpid()}) + "\n", encoding="utf-8")
    _Heartbeat(alive, interval_s).start()
    # Kept open for the process's life: faulthandler writes to the descriptor from its signal handler.
    traces = (directory / f"rank-{rank}.traceback").open("a", encoding="utf-8")
    faulthandler.register(signal.SIGTERM, file=traces, all_threads=True, chain=True)

    sys.argv = [script, *script_args]
    sys.path[0] = str(Path(script).resolve().parent)  # as `python SCRIPT` sets it
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as stop:
        if stop.code not in (None, 0):
            _record_failure(directory, rank, world_size, stale_after_s, f"SystemExit({stop.code!r})\n")
        raise
    except BaseException:
        _record_failure(directory, rank, world_size, stale_after_s, traceback.format_exc())
        raise
    return 0


def suspects(directory: Path, nodes: Sequence[str]) -> tuple[str, list[str]] | None:
    """(reason, suspect nodes) when ranks went silent before the first failure; None for an ordinary failure."""
    try:
        first: dict[str, Any] = json.loads((directory / FIRST_FAILURE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # no rank's script failed under this wrapper (killed from outside, or never started)
    bound = float(first["stale_after_s"])
    ages: dict[str, float | None] = first["heartbeat_ages_s"]
    silent = sorted((int(rank) for rank, age in ages.items() if age is None or age > bound))
    if not silent:
        return None
    per_node = max(1, int(first["world_size"]) // max(1, len(nodes)))
    suspect_nodes: list[str] = []
    for rank in silent:
        node = _recorded_node(directory, rank)
        if node is None and rank // per_node < len(nodes):
            node = nodes[rank // per_node]  # torchrun's --node_rank is SLURM_NODEID: ranks are laid out node by node
        if node is not None and node not in suspect_nodes:
            suspect_nodes.append(node)
    listed = " ".join(str(rank) for rank in silent[:16]) + (" ..." if len(silent) > 16 else "")
    reason = (
        f"rank {first['rank']} failed first; {len(silent)} of {first['world_size']} ranks had sent no heartbeat "
        f"for over {bound:g} s ({listed})"
    )
    return reason, suspect_nodes


def _recorded_node(directory: Path, rank: int) -> str | None:
    try:
        node = json.loads(_alive_file(directory, rank).read_text(encoding="utf-8")).get("node")
    except (OSError, ValueError):
        return None
    return node if isinstance(node, str) and node else None


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="liveness.py")
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser("run")
    start.add_argument("--dir", type=Path, required=True)
    start.add_argument("--interval", type=float, required=True)
    start.add_argument("--stale-after", type=float, required=True)
    start.add_argument("script")
    start.add_argument("script_args", nargs=argparse.REMAINDER)
    check = commands.add_parser("suspects")
    check.add_argument("--dir", type=Path, required=True)
    check.add_argument("--nodes", default="", help="the job's nodes in SLURM_NODEID order, space separated")
    args = parser.parse_args(argv)
    if args.command == "run":
        script_args = args.script_args[1:] if args.script_args[:1] == ["--"] else args.script_args
        return run(args.dir, args.interval, args.stale_after, args.script, script_args)
    found = suspects(args.dir, args.nodes.split())
    if found is None:
        return 1
    reason, nodes = found
    (args.dir / SUSPECT_NODES_FILE).write_text("".join(f"{node}\n" for node in nodes), encoding="utf-8")
    print(reason)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
