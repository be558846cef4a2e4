"""Follow a submitted job to its end and summarise the run:

    python -m launch.follow --job ID --run-dir DIR [--timeout SECONDS]

Prints the job's log as it grows (the environment block folded to one line), waits through requeues until SLURM
reports a final state, then prints the final loss, throughput, the last checkpoint and the plot (FSDP), or the
newest NeMo/NxDT checkpoint and their TensorBoard logs, and the step's own exit status. For a sharded prepare
(llm-prepare-cluster: its merge job and OUT_shards as the run directory) the logs are every shard's progress and ETA,
and the summary the merged dataset or each incomplete shard by name. Exits 0 only when the job COMPLETED. Uses the
SLURM clients of $SLURM_CONF.
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from spec.cli import OneLineParser, user_errors
from spec.cli_types import output_directory
from training.checkpoint.framework_layout import LIGHTNING_DIRS, newest_committed
from training.data.shard_plan import PLAN_NAME, read_plan
from training.prepare_shards import status_lines

TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}
_FIELD_RE = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=(.*?)(?=\s+[A-Za-z][A-Za-z0-9_:/]*=|$)")


def job_fields(job_id: str) -> dict[str, str]:
    result = subprocess.run(
        ["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True, timeout=30, check=False
    )
    return dict(_FIELD_RE.findall(result.stdout.strip())) if result.returncode == 0 else {}


class LogFollower:
    """Prints new lines of the job's log files, folding the environment dump each attempt starts with."""

    def __init__(self, log_dir: Path, out: TextIO) -> None:
        self.log_dir = log_dir
        self.out = out
        self.offsets: dict[Path, int] = {}
        self.in_environment = False
        self.environment_lines = 0

    def poll(self) -> None:
        for log in sorted(self.log_dir.glob("*.out")):
            with log.open("rb") as handle:
                handle.seek(self.offsets.get(log, 0))
                data = handle.read()
            complete = data[: data.rfind(b"\n") + 1]  # a partial last line waits for the next poll
            self.offsets[log] = self.offsets.get(log, 0) + len(complete)
            for line in complete.decode(errors="replace").splitlines():
                self._line(line)
        self.out.flush()

    def _line(self, line: str) -> None:
        if line == "---- environment ----":
            self.in_environment, self.environment_lines = True, 0
        elif line == "---- end of environment ----":
            self.in_environment = False
            print(f"  (job environment: {self.environment_lines} variables, in the log)", file=self.out)
        elif self.in_environment:
            self.environment_lines += 1
        else:
            print(line, file=self.out)


@dataclass(frozen=True)
class RunSummary:
    final_step: int | None
    final_loss: float | None
    tokens_per_s_per_device: float | None
    world_size: int | None
    checkpoint: Path | None
    plot: Path | None
    tensorboard: Path | None = None
    exit_status: str | None = None  # the step's own verdict (exit_status.json): code and reason

    def lines(self) -> list[str]:
        lines = []
        if self.final_step is not None and self.final_loss is not None:
            lines.append(f"final loss      {self.final_loss:.4f} at step {self.final_step}")
        if self.tokens_per_s_per_device is not None:
            world = self.world_size or 1
            total = self.tokens_per_s_per_device * world
            lines.append(
                f"throughput      {self.tokens_per_s_per_device:,.0f} tokens/s per rank, {total:,.0f} tokens/s "
                f"over {world} ranks (median of the last steps)"
            )
        if self.exit_status is not None:
            lines.append(f"exit status     {self.exit_status}")
        lines.append(f"checkpoint      {self.checkpoint or 'none'}")
        lines.append(f"plot            {self.plot or 'none'}")
        if self.tensorboard is not None:
            lines.append(f"tensorboard     tensorboard --logdir {self.tensorboard}")
        return lines


# NeMo (RUN_DIR/nemo/...), NxDT (RUN_DIR/nxdt/...) and Megatron Bridge (RUN_DIR/checkpoints/iter_*) checkpoints,
# committed by each framework's own rule (training/checkpoint/framework_layout.py, which the replica watcher reads too).
_FRAMEWORK_DIRS = LIGHTNING_DIRS


def _framework_checkpoint(run_dir: Path) -> Path | None:
    newest = newest_committed(run_dir)
    return newest.path if newest is not None else None


def _framework_tensorboard(run_dir: Path) -> Path | None:
    for base in _FRAMEWORK_DIRS:
        if next((run_dir / base).glob("**/events.out.tfevents.*"), None) is not None:
            return run_dir / base
    return None


def _exit_status(run_dir: Path) -> str | None:
    try:
        status = json.loads((run_dir / "exit_status.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return f"{status.get('exit_code')} ({status.get('reason')})"


def summarize(run_dir: Path, window: int = 20) -> RunSummary:
    records: list[dict[str, Any]] = []
    metrics = run_dir / "metrics.jsonl"
    if metrics.exists():
        for line in metrics.read_text(encoding="utf-8").splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:
                continue
    train = {r["step"]: r for r in records if r.get("kind") == "train"}  # the last attempt's record per step
    worlds = [r.get("world_size") for r in records if r.get("kind") == "event" and r.get("world_size")]
    final = train[max(train)] if train else None
    recent = [train[step]["tokens_per_s"] for step in sorted(train)[-window:] if "tokens_per_s" in train[step]]
    speed = statistics.median(recent) if recent else None
    checkpoints = sorted(
        (int(path.name.split("-", 1)[1]), path)
        for path in (run_dir / "checkpoints").glob("step-*")
        if path.is_dir() and path.name.split("-", 1)[1].isdigit() and (path / "COMMITTED").is_file()
    )
    plot, tensorboard = run_dir / "metrics.png", run_dir / "tensorboard"
    return RunSummary(
        final_step=final["step"] if final else None,
        final_loss=final.get("loss") if final else None,
        tokens_per_s_per_device=speed,
        world_size=worlds[-1] if worlds else None,
        checkpoint=checkpoints[-1][1] if checkpoints else _framework_checkpoint(run_dir),
        plot=plot if plot.exists() else None,
        tensorboard=tensorboard if tensorboard.is_dir() else _framework_tensorboard(run_dir),
        exit_status=_exit_status(run_dir),
    )


def follow(job_id: str, run_dir: Path, timeout_s: float, out: TextIO = sys.stdout, poll_s: float = 2.0) -> int:
    follower = LogFollower(run_dir / "logs", out)
    deadline = time.monotonic() + timeout_s
    state, job = "", {}
    while time.monotonic() < deadline:
        follower.poll()
        job = job_fields(job_id)
        state = job.get("JobState", "")
        if state in TERMINAL:
            break
        time.sleep(poll_s)
    follower.poll()
    if state not in TERMINAL:
        print(f"job {job_id} still {state or 'unknown'} after {timeout_s:.0f} s; it keeps running", file=out)
        return 1
    print(
        f"\njob {job_id}: {state} (exit {job.get('ExitCode', '?')}, requeued {job.get('Restarts', '0')} times)",
        file=out,
    )
    for line in _summary_lines(run_dir):
        print(line, file=out)
    return 0 if state == "COMPLETED" else 1


def _summary_lines(run_dir: Path) -> list[str]:
    """A training run's summary, or a sharded prepare's (llm-prepare-cluster: the plan in its directory)."""
    if (run_dir / PLAN_NAME).is_file():
        return status_lines(read_plan(run_dir / PLAN_NAME))
    return summarize(run_dir).lines()


@user_errors
def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m launch.follow", description=__doc__.splitlines()[0])
    parser.add_argument("--job", required=True, help="the job id that launch.submit printed")
    parser.add_argument("--run-dir", required=True, type=output_directory)
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds to follow before giving up")
    args = parser.parse_args(argv)
    if not args.job.isdigit():
        parser.error(f"--job: {args.job!r} is not a job id")
    if args.timeout <= 0:
        parser.error(f"--timeout: {args.timeout} must be positive")
    return follow(args.job, args.run_dir, args.timeout)


if __name__ == "__main__":
    raise SystemExit(main())
