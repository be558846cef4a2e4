"""The hang watchdog: a training step that runs far longer than the run's own steps ends the job, with the live
ranks' stack traces, a distinct exit status (EXIT_HANG) and the nodes of the ranks that never reported.

A rank stopped in its tracks (SIGSTOP, a wedged driver, a lost node) cannot run a watchdog of its own; its peers
can: they block in the next collective, and a thread of theirs sees that step outlast the bound. Each live rank then
dumps every Python thread's stack (faulthandler; the flight recorder's collectives too when it records), writes
RUN_DIR/hang/rank-N.json and waits a short grace for its peers' reports. The lowest rank that reported names the
ranks that did not and their nodes (hang/report.json; hang/suspect_nodes, one a line, for the job script, which
drains them) and writes the exit status; every live rank exits with EXIT_HANG.

Only time inside a step counts, and only from the second step of a process on: start-up, the first step (compile,
warm-up), validation and checkpoints are not timed (a save has its own window: planner.stop_window).
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import logging
import os
import socket
import statistics
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from training.config import JobConfig, WatchdogSection
from training.signals import EXIT_HANG, write_exit_status

log = logging.getLogger("training")

HANG_DIR = "hang"
REPORT_FILE = "report.json"
SUSPECT_NODES_FILE = "suspect_nodes"
# The flight recorder records collectives only with a buffer (torch reads the first variable, then the older name).
FLIGHT_RECORDER_ENV = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")


def node_name() -> str:
    """The Slurm node this rank runs on (several local nodes share one host name), else the host name."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


def hang_bound_s(section: WatchdogSection, step_times_s: list[float], sync_every: int) -> float:
    """The longest a step may run: max(floor_s, factor x reference x sync_every), the reference being the larger of
    the running median step time and the planner's (either may be unknown)."""
    median = statistics.median(step_times_s) if step_times_s else 0.0
    reference = max(median, section.planned_step_s or 0.0)
    return max(section.floor_s, section.factor * reference * sync_every)


def with_planned_step(job: JobConfig, step_s: float) -> JobConfig:
    """The job with the planner's step time for its watchdog, unless the job config names one of its own."""
    if job.watchdog.planned_step_s is not None:
        return job
    return job.with_overrides(**{"watchdog.planned_step_s": step_s})


def hang_watchdog_note(job: JobConfig) -> str:
    """What llm-submit prints: the bound the trainer starts with, before it has timed a step of its own."""
    section = job.watchdog
    if not section.enabled:
        return "hang watchdog: off (watchdog.enabled false); a hung collective waits for the process group's timeout"
    bound = hang_bound_s(section, [], job.train.log_every)
    planned = f", planned step {section.planned_step_s:.3g} s" if section.planned_step_s else ""
    return (
        f"hang watchdog: a step over {bound:.0f} s ends the job (exit {EXIT_HANG}) and drains the silent ranks' "
        f"nodes (floor {section.floor_s:.0f} s, {section.factor:g} x the step time{planned})"
    )


def clear_reports(run_dir: Path) -> None:
    """A new attempt's reports only (rank 0, before the gather every rank passes before its first timed step): an
    old attempt's would name the wrong ranks."""
    directory = run_dir / HANG_DIR
    if directory.is_dir():
        for path in directory.iterdir():
            if path.is_file():
                path.unlink(missing_ok=True)


@dataclass(frozen=True)
class Hang:
    step: int
    elapsed_s: float
    bound_s: float


class HangWatchdog:
    """Times each step (`with watchdog.step(n):`) from a thread of its own; see the module's docstring."""

    def __init__(
        self,
        section: WatchdogSection,
        run_dir: Path,
        rank: int,
        rank_nodes: list[str],
        sync_every: int,
        flight_recorder: bool = False,
    ) -> None:
        self.section = section
        self.directory = run_dir / HANG_DIR
        self.run_dir = run_dir
        self.rank = rank
        self.rank_nodes = rank_nodes
        self.sync_every = sync_every
        self.flight_recorder = flight_recorder
        self._samples: deque[float] = deque(maxlen=section.window)
        self._since_sync_s = 0.0
        self._since_sync_steps = 0
        self._steps_seen = 0
        self._lock = threading.Lock()
        self._current: tuple[int, float] | None = None  # (step, monotonic start) while a timed step runs
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    def bound_s(self) -> float:
        with self._lock:
            samples = list(self._samples)
        return hang_bound_s(self.section, samples, self.sync_every)

    def start(self) -> None:
        if not self.section.enabled or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._watch, name="hang-watchdog", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._closed.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    @contextlib.contextmanager
    def step(self, step: int) -> Iterator[None]:
        """Times one training step; the first of this process is not timed (warm-up)."""
        timed = self._steps_seen > 0
        started = time.monotonic()
        if timed:
            with self._lock:
                self._current = (step, started)
        try:
            yield
        finally:
            self._steps_seen += 1
            with self._lock:
                self._current = None
            if timed:
                self._record(time.monotonic() - started, synced=step % self.sync_every == 0)

    def _record(self, seconds: float, synced: bool) -> None:
        """Between logged steps the host runs ahead of the device and waits for it at the logged step: a sample is
        the mean over one such period, and the bound allows sync_every of them for one step."""
        self._since_sync_s += seconds
        self._since_sync_steps += 1
        if synced:
            with self._lock:
                self._samples.append(self._since_sync_s / self._since_sync_steps)
            self._since_sync_s, self._since_sync_steps = 0.0, 0

    def _watch(self) -> None:
        while not self._closed.is_set():
            with self._lock:
                current = self._current
                samples = list(self._samples)
            if current is not None:
                step, started = current
                bound = hang_bound_s(self.section, samples, self.sync_every)
                elapsed = time.monotonic() - started
                if elapsed > bound:
                    self._end_job(Hang(step, elapsed, bound))
                    return
                wait = min(1.0, max(0.05, bound - elapsed))
            else:
                wait = 0.2
            self._closed.wait(wait)

    # -- on a hang -------------------------------------------------------------------------------------------------

    def _end_job(self, hang: Hang) -> None:
        """Report, wait for the peers' reports, name the silent ranks (lowest reporter), exit with EXIT_HANG."""
        try:
            self._report(hang)
            reported = self._wait_until(lambda: len(self._reported_ranks()) == len(self.rank_nodes))
            if self.rank == min(reported):
                self._name_suspects(hang, reported)
            else:  # the first exit ends every rank (torchrun, srun): the lowest reporter must have written first
                self._wait_until(lambda: (self.directory / REPORT_FILE).exists())
        except Exception as error:  # the exit below must happen whatever the report met
            log.error("hang: the report failed: %s: %s", type(error).__name__, error)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(EXIT_HANG)  # the main thread is blocked in a collective: nothing else can end this process

    def _report(self, hang: Hang) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        node = self.rank_nodes[self.rank]
        log.error(
            "hang: step %d has run %.0f s, over the watchdog bound of %.0f s; rank %d on %s: its stack traces follow",
            hang.step, hang.elapsed_s, hang.bound_s, self.rank, node,
        )  # fmt: skip
        sys.stdout.flush()
        print(f"---- rank {self.rank} ({node}) stack traces at the hang ----", file=sys.stderr, flush=True)
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        with (self.directory / f"rank-{self.rank}.traceback").open("w") as traces:
            faulthandler.dump_traceback(file=traces, all_threads=True)
        if self.flight_recorder:
            self._dump_flight_recorder()
        record = {"rank": self.rank, "node": node, "step": hang.step, "elapsed_s": round(hang.elapsed_s, 3),
                  "bound_s": round(hang.bound_s, 3)}  # fmt: skip
        _write_atomically(self.directory / f"rank-{self.rank}.json", json.dumps(record) + "\n")

    def _dump_flight_recorder(self) -> None:
        """The collectives each process group recorded (torch's flight recorder), for the NCCL hang's analysis."""
        try:
            from torch._C._distributed_c10d import _dump_fr_trace  # type: ignore[attr-defined]  # not in the stubs

            (self.directory / f"flight-recorder-rank-{self.rank}.pkl").write_bytes(_dump_fr_trace())
        except Exception as error:  # a build without it, or a recorder that recorded nothing: the traces remain
            log.error("hang: no flight recorder dump: %s: %s", type(error).__name__, error)

    def _reported_ranks(self) -> list[int]:
        ranks = []
        for rank in range(len(self.rank_nodes)):
            if (self.directory / f"rank-{rank}.json").exists():
                ranks.append(rank)
        return ranks

    def _wait_until(self, condition: Callable[[], bool]) -> list[int]:
        """Until the condition holds or report_grace_s has passed; returns the ranks that have reported."""
        deadline = time.monotonic() + self.section.report_grace_s
        while not condition() and time.monotonic() < deadline:
            time.sleep(0.2)
        return self._reported_ranks()

    def _name_suspects(self, hang: Hang, reported: list[int]) -> None:
        silent = [rank for rank in range(len(self.rank_nodes)) if rank not in reported]
        nodes = sorted({self.rank_nodes[rank] for rank in silent})
        report = {"step": hang.step, "bound_s": round(hang.bound_s, 3), "reported_ranks": reported,
                  "silent_ranks": silent, "suspect_nodes": nodes}  # fmt: skip
        _write_atomically(self.directory / REPORT_FILE, json.dumps(report) + "\n")
        _write_atomically(self.directory / SUSPECT_NODES_FILE, "".join(f"{node}\n" for node in nodes))
        if silent:
            who = f"rank {', '.join(map(str, silent))} on {', '.join(nodes)} sent no report (stopped or lost)"
        else:
            who = "every rank reported (a collective that never completes, no single suspect)"
        reason = f"hang: step {hang.step} ran over the watchdog bound of {hang.bound_s:.0f} s; {who}"
        log.error("%s", reason)
        write_exit_status(self.run_dir, EXIT_HANG, reason, hang.step - 1)


def _write_atomically(path: Path, text: str) -> None:
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)
