"""The S3 copy of a framework's checkpoints (Megatron Bridge, NeMo 2, NxDT), kept from the batch host.

Those jobs run the framework's own trainer (in a pyxis container, or NxDT's venv), so nothing in them copies a
checkpoint anywhere. The job script (launch/jobs/common.sh: replica_restore, replica_watch_start/stop) runs this
module beside the training step with the release's Python, only when $LLM_CHECKPOINT_REPLICA is set:

    python -m training.checkpoint.framework_replica restore --run-dir RUN_DIR --layout megatron
    python -m training.checkpoint.framework_replica watch --run-dir RUN_DIR --layout megatron --stop-file FILE

`restore`, before the step: when the replica's newest complete copy is newer than the newest checkpoint committed on
the file system, put it back in its place (and, for Megatron Bridge, the tracker files naming it), so the framework
resumes from it. `watch`, while the step runs: every few seconds, find the newest committed checkpoint
(framework_layout.py: each framework's own rule) and, once its files have stopped changing, copy it with the FSDP
trainer's CheckpointReplica (the same two slots and manifest, the manifest also naming the layout and the
checkpoint's place). When FILE appears (the step has ended) it does a final pass without the wait and exits.

It ignores the stop signals Slurm and the job script send (TERM, USR1, USR2, INT, HUP): only the stop file ends it,
after its final pass, or SIGKILL (the job script's bound on that pass, or Slurm's at the end of KillWait). A failed
upload is logged and recorded in RUN_DIR/replica.json, and the next pass tries again; it never touches training.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from spec.cli import OneLineParser, user_errors
from spec.errors import UserError
from training.checkpoint.framework_layout import (
    LAYOUTS,
    CheckpointLayout,
    FrameworkCheckpoint,
    newest_committed,
    remove_leftover,
)
from training.checkpoint.ownership import NotOwnedError, check_if_present
from training.checkpoint.replica import STATUS_FILE, BackgroundUploader, CheckpointReplica, ReplicaCopy
from training.checkpoint.replica_location import ReplicaError, ReplicaUnreachable, replica_from_env
from training.signals import EXIT_NOT_OWNED

log = logging.getLogger("training")

POLL_S = 2.0
# Exit statuses of `restore`: the file system has no checkpoint and the replica's copy cannot be restored (a retry
# may succeed: the job counts it as a failed attempt). A wrong $LLM_CHECKPOINT_REPLICA is a UserError (exit 2).
EXIT_RESTORE_FAILED = 1


def _place(copy: ReplicaCopy, run_dir: Path, layout: CheckpointLayout, url: str) -> Path:
    """Where a copy goes back: its recorded place in the run directory, refused outside it or for another layout."""
    about = copy.checkpoint or {}
    if about.get("layout") != layout.name:
        held = about.get("layout") or "an FSDP trainer's (step-N)"
        raise ReplicaError(f"{url}slot-{copy.slot}/ holds {held} checkpoint, not a {layout.framework} one")
    relative = Path(about.get("path", ""))
    if not relative.parts or relative.is_absolute() or ".." in relative.parts:
        raise ReplicaError(f"{url}slot-{copy.slot}/{'MANIFEST.json'} names {str(relative)!r} outside the run")
    return run_dir / relative


def restore_copy(replica: CheckpointReplica, copy: ReplicaCopy, run_dir: Path, layout: CheckpointLayout) -> Path:
    """Put `copy` back where the framework reads it, verified against its manifest, and name it as the latest."""
    final = _place(copy, run_dir, layout, replica.target.url)
    remove_leftover(final)  # only ever uncommitted: a committed one this recent means there was nothing to restore
    path = replica.restore(copy, final.parent, final=final)
    layout.after_restore(FrameworkCheckpoint(layout.name, copy.step, path, run_dir))
    return path


def restore_if_newer(replica: CheckpointReplica, run_dir: Path, layout: CheckpointLayout) -> Path | None:
    """Restore the replica's newest copy when the file system has no committed checkpoint that recent."""
    newest = replica.latest()
    local = newest_committed(run_dir, layout.name)
    if newest is None or (local is not None and local.step >= newest.step):
        log.info(
            "replica: nothing to restore (file system: %s; replica %s: %s)",
            local.relative if local else "no checkpoint",
            replica.target.url,
            f"step {newest.step}" if newest else "no complete copy",
        )
        return None
    log.warning(
        "checkpoint: %s has no %s checkpoint at or after step %d (latest here: %s); restoring it from %sslot-%d/",
        run_dir,
        layout.framework,
        newest.step,
        local.relative if local else "none",
        replica.target.url,
        newest.slot,
    )
    started = time.monotonic()
    path = restore_copy(replica, newest, run_dir, layout)
    log.info("checkpoint: restored %s from the replica in %.1f s", path, time.monotonic() - started)
    return path


def _signature(path: Path) -> tuple[tuple[str, int, int], ...]:
    """Every file's name, size and modification time: a checkpoint still being written changes it."""
    entries = []
    for file in sorted(path.rglob("*")):
        try:
            stat = file.stat()
        except OSError:
            continue
        if file.is_file():
            entries.append((file.relative_to(path).as_posix(), stat.st_size, stat.st_mtime_ns))
    return tuple(entries)


class ReplicaWatcher:
    """One pass at a time: the newest committed checkpoint goes up once the replica lacks it and it is quiet."""

    def __init__(self, replica: CheckpointReplica, run_dir: Path, layout: CheckpointLayout) -> None:
        self.run_dir = run_dir
        self.layout = layout
        self.uploader = BackgroundUploader(replica, run_dir, self._about)
        self.copied_step: int | None = None
        self.pending: tuple[Path, tuple[tuple[str, int, int], ...]] | None = None

    def _about(self, path: Path) -> dict[str, str]:
        return {"layout": self.layout.name, "path": path.relative_to(self.run_dir).as_posix()}

    def pass_once(self, final: bool = False) -> int | None:
        """Copies the newest committed checkpoint if due; returns the step copied by this pass, if any."""
        newest = newest_committed(self.run_dir, self.layout.name)
        if newest is None or newest.step == self.copied_step:
            return None
        signature = _signature(newest.path)
        if not final and self.pending != (newest.path, signature):
            # Files may still follow the commit point (Bridge: run_config.yaml after train_state.pt): copy it at the
            # next pass if nothing changed meanwhile. The final pass runs after the step ended: nothing writes.
            self.pending = (newest.path, signature)
            return None
        self.uploader.submit(newest.step, newest.path)
        self.uploader.finish()
        if self._recorded_ok(newest.step):
            self.copied_step = newest.step
            return newest.step
        return None  # logged and recorded by the uploader; the next pass tries again

    def _recorded_ok(self, step: int) -> bool:
        try:
            outcome = json.loads((self.run_dir / STATUS_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        return bool(outcome.get("ok")) and outcome.get("step") == step

    def watch(self, stop_file: Path, poll_s: float = POLL_S, parent: int | None = None) -> None:
        while not stop_file.exists() and (parent is None or os.getppid() == parent):
            self.pass_once()
            time.sleep(poll_s)
        started = time.monotonic()
        copied = self.pass_once(final=True)
        log.info(
            "replica: final pass done in %.1f s (%s)",
            time.monotonic() - started,
            f"step {copied} copied" if copied is not None else "nothing new to copy",
        )


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = OneLineParser(prog="python -m training.checkpoint.framework_replica", description=__doc__)
    parser.add_argument("action", choices=("restore", "watch"))
    parser.add_argument("--run-dir", required=True, type=Path)
    parser.add_argument("--layout", required=True, choices=sorted(LAYOUTS))
    parser.add_argument("--stop-file", type=Path, help="watch: the file whose appearance ends the watch")
    parser.add_argument("--poll-s", type=float, default=POLL_S, help="watch: seconds between passes")
    args = parser.parse_args(argv)
    if args.action == "watch" and args.stop_file is None:
        parser.error("--stop-file: required for watch")
    if args.poll_s <= 0:
        parser.error(f"--poll-s: {args.poll_s} must be positive")
    return args


class ReplicaSettingError(UserError):
    pass


@user_errors
def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stdout)
    log.setLevel(logging.INFO)  # ours; boto3's INFO lines stay out of the job's log
    layout = LAYOUTS[args.layout]
    try:
        target = replica_from_env()
    except ReplicaError as error:
        raise ReplicaSettingError(str(error)) from None  # exit 2: no retry fixes it
    if target is None:
        return 0  # no replica configured: nothing to keep
    try:  # the copy is restored into the run directory (or read from it): only the job user's own
        check_if_present(args.run_dir, "--run-dir")
    except NotOwnedError as error:
        log.error("replica: %s", error)
        return EXIT_NOT_OWNED
    replica = CheckpointReplica(target)
    if args.action == "restore":
        try:
            restore_if_newer(replica, args.run_dir, layout)
        except (ReplicaError, OSError) as error:
            local = newest_committed(args.run_dir, layout.name)
            if local is not None or isinstance(error, ReplicaUnreachable):
                # As the FSDP trainer does (replica.ReplicaSync): train on from the file system's checkpoint, or
                # from step 0 when S3 cannot be reached at all; uploads never overwrite the newest copy.
                log.error("replica: %s; resuming from %s", error, local.relative if local else "step 0")
                return 0
            log.error("replica: the file system has no checkpoint and the replica cannot be restored: %s", error)
            return EXIT_RESTORE_FAILED
        return 0
    for signum in (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)  # the job's stop signals: the final pass comes after the step's save
    log.info("replica: copying each committed %s checkpoint of %s to %s", layout.framework, args.run_dir, target.url)
    ReplicaWatcher(replica, args.run_dir, layout).watch(args.stop_file, args.poll_s, os.getppid())
    return 0


if __name__ == "__main__":
    sys.exit(main())
