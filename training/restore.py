"""`llm-restore`: bring a run's checkpoint back from its S3 copy onto the file system, or list the copies.

    llm-restore --run-dir /fsx/runs/llama3-8b --list
    llm-restore --run-dir /fsx/runs/llama3-8b            # the newest copy, unless the file system has it already

A NeMo 2, Megatron Bridge or NxDT run's copy (its job's replica watcher made it) goes back to its own place in the
run directory, and a Megatron Bridge iteration is named in the tracker files the framework resumes from.

A job does the same by itself at start (training/checkpoint/replica.py); this command is for a restore ahead of the
job (a new file system, a copy to another cluster) and to see what the replica holds. The replica is --replica, else
$LLM_CHECKPOINT_REPLICA, else the deployment spec's data.checkpoint_replica for this run directory (what llm-submit
gives the job).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from spec.cli import SPEC_ENV, OneLineParser, load_command_spec, user_errors
from spec.errors import UserError
from training.checkpoint.framework_layout import LAYOUTS, newest_committed
from training.checkpoint.framework_replica import restore_copy
from training.checkpoint.layout import latest_complete, step_dir
from training.checkpoint.replica import CheckpointReplica, ReplicaCopy
from training.checkpoint.replica_location import REPLICA_ENV, ReplicaError, parse_replica_url, replica_url


class RestoreError(UserError):
    pass


def _step(text: str) -> int:
    try:
        step = int(text)
    except ValueError:
        step = 0
    if step < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a training step (1 or more)")
    return step


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = OneLineParser(prog="llm-restore", description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", required=True, type=Path, help="the run directory the job was submitted with")
    parser.add_argument("--checkpoint-dir", type=Path, help="checkpoint.dir when not RUN_DIR/checkpoints")
    parser.add_argument(
        "--replica", help=f"s3://BUCKET-OR-ACCESS-POINT-ARN/PREFIX/ (default: ${REPLICA_ENV} or the spec)"
    )
    parser.add_argument("--spec", type=Path, help=f"deployment spec (default: ${SPEC_ENV}, else spec/default.yaml)")
    parser.add_argument("--step", type=_step, help="restore this step's copy (default: the newest)")
    parser.add_argument("--list", action="store_true", help="list the complete copies and restore nothing")
    return parser.parse_args(argv)


def _replica_url(args: argparse.Namespace) -> str:
    if args.replica:
        return str(args.replica)
    if os.environ.get(REPLICA_ENV):
        return os.environ[REPLICA_ENV]
    spec = load_command_spec(args.spec, RestoreError)
    dataset = spec.checkpoint_dataset
    if dataset is None or dataset.output_prefix is None:
        raise RestoreError(
            f"--replica: not given, ${REPLICA_ENV} is unset and spec {spec.name!r} sets no data.checkpoint_replica"
        )
    return replica_url(f"s3://{spec.access_point_arn(dataset)}/{dataset.output_prefix}", args.run_dir)


def _restore_framework(replica: CheckpointReplica, copy: ReplicaCopy, run_dir: Path) -> int:
    """A NeMo 2, Megatron Bridge or NxDT checkpoint (the job's replica watcher copied it): back in its place in the run
    directory, and for Megatron Bridge the tracker files naming it."""
    assert copy.checkpoint is not None
    layout = LAYOUTS.get(copy.checkpoint.get("layout", ""))
    if layout is None:
        raise RestoreError(
            f"--replica: {replica.target.url}slot-{copy.slot}/ holds a {copy.checkpoint.get('layout')!r} checkpoint, "
            f"which this release cannot restore (layouts: {', '.join(sorted(LAYOUTS))})"
        )
    if any(held.step == copy.step for held in layout.committed(run_dir)):
        print(f"{layout.framework} step {copy.step} is already committed in {run_dir}; nothing to restore")
        return 0
    path = restore_copy(replica, copy, run_dir, layout)
    newest = newest_committed(run_dir, layout.name)
    note = (
        "" if newest is None or newest.step == copy.step else f" (the run resumes from its newest, step {newest.step})"
    )
    print(f"restored {path} from {replica.target.url}slot-{copy.slot}/{note}")
    return 0


@user_errors
def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    root = args.checkpoint_dir or args.run_dir / "checkpoints"
    try:
        replica = CheckpointReplica(parse_replica_url(_replica_url(args)))
        copies = replica.copies()
        if args.list:
            for copy in copies:
                size = sum(int(record["size"]) for record in copy.files.values())
                place = f"  {copy.checkpoint.get('path')}" if copy.checkpoint else ""
                print(
                    f"step-{copy.step}  {replica.target.url}slot-{copy.slot}/  {len(copy.files)} files  "
                    f"{size / 1e9:.3f} GB{place}"
                )
            return 0
        wanted = [c for c in copies if args.step is None or c.step == args.step]
        if not wanted:
            held = ", ".join(f"step-{c.step}" for c in copies) or "none"
            what = f"step-{args.step}" if args.step is not None else "a complete copy"
            raise RestoreError(f"--step: {replica.target.url} holds no {what} (complete copies: {held})")
        copy = wanted[-1]
        if copy.checkpoint is not None:
            return _restore_framework(replica, copy, args.run_dir)
        if step_dir(root, copy.step).joinpath("COMMITTED").is_file():
            print(f"{step_dir(root, copy.step)} is already committed here; nothing to restore")
            return 0
        path = replica.restore(copy, root)
    except ReplicaError as error:
        raise RestoreError(str(error)) from None
    latest = latest_complete(root)
    note = "" if latest is None or latest[0] == copy.step else f" (the run resumes from its newest, step-{latest[0]})"
    print(f"restored {path} from {replica.target.url}slot-{copy.slot}/{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
