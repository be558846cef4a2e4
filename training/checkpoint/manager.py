"""Save and load sharded checkpoints with torch.distributed.checkpoint (DCP), committed atomically.

Contents of ROOT/step-N/: DCP shards of the model and optimizer in storage.py's raw-bytes files (resharded on
load, so a run may resume at another world size), trainer_state.json (step, the data loader's global position,
guard history, model shape) and rng/rank{r}.pt. Every failure is turned into CheckpointError on every rank at
the same point, so all ranks stop together and the previous committed checkpoint is left untouched.
"""

from __future__ import annotations

import io
import json
import logging
import pickle
import shutil
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.api import CheckpointException

from training.checkpoint import ownership
from training.checkpoint.errors import CheckpointError, CheckpointSpaceError
from training.checkpoint.layout import (
    MARKER,
    RNG_DIR,
    TRAINER_STATE,
    complete_checkpoints,
    fsync_dir,
    fsync_tree,
    incomplete_entries,
    latest_complete,
    remove_checkpoint,
    step_dir,
    tmp_dir,
    uncommit,
    write_durably,
)
from training.checkpoint.replica import ReplicaSync
from training.checkpoint.space import check_free_space, out_of_space_hint
from training.checkpoint.storage import TensorFileReader, TensorFileWriter
from training.config import CheckpointSection

log = logging.getLogger("training")


def describe_failure(error: BaseException) -> str:
    """One line: DCP's per-rank exceptions reduced to 'rank r: message'."""
    if isinstance(error, CheckpointException):
        parts = []
        for rank, failure in sorted(error.failures.items()):
            cause = failure[0] if isinstance(failure, tuple) else failure
            parts.append(f"rank {rank}: {cause}")
        return "; ".join(parts) or str(error).splitlines()[0]
    return f"{type(error).__name__}: {error}" if not isinstance(error, OSError) else str(error)


def _delete_all(paths: list[Path]) -> None:
    for path in paths:
        remove_checkpoint(path)  # already un-committed: this deletes the files


@dataclass
class _PendingSave:
    step: int
    future: Future
    started: float


class CheckpointManager:
    def __init__(self, root: Path, section: CheckpointSection, rank: int, world_size: int, param_count: int) -> None:
        self.root = root
        self.section = section
        self.rank = rank
        self.world_size = world_size
        self.param_count = param_count
        self._pending: _PendingSave | None = None
        self._pruning: threading.Thread | None = None
        # Background saves run their collectives on their own gloo group, never interleaved with training's; the
        # per-step poll that commits a finished one agrees on a second, so it never waits behind a save's collective.
        self._async_group = dist.new_group(backend="gloo") if section.async_save else None
        self._poll_group = dist.new_group(backend="gloo") if section.async_save else None
        self._replica = ReplicaSync.from_env(root, rank)  # the S3 copy ($LLM_CHECKPOINT_REPLICA), rank 0's side

    # -- agreement across ranks ------------------------------------------------------------------------------------

    def _agree(self, error: str | None) -> str | None:
        """Every rank learns the first failure anywhere (or None), so all of them stop at the same point."""
        gathered: list[str | None] = [None] * self.world_size
        dist.all_gather_object(gathered, error)
        for rank, message in enumerate(gathered):
            if message is not None:
                return message if self.world_size == 1 else f"rank {rank}: {message}"
        return None

    def _last_good(self) -> str:
        latest = latest_complete(self.root)
        return str(latest[1]) if latest else "none"

    def _fail(self, step: int, what: str, reason: str) -> CheckpointError:
        """Called on every rank at the same point: diagnose, then rank 0 removes the partial directory."""
        hint = "" if "No space left" in reason else out_of_space_hint(self.root, self.param_count)
        dist.barrier()  # every rank has looked at the disk before the partial checkpoint frees its space
        if self.rank == 0:
            shutil.rmtree(tmp_dir(self.root, step), ignore_errors=True)
        return CheckpointError(
            f"checkpoint step-{step}: {what} failed: {reason}{hint}; the last good checkpoint is {self._last_good()}"
        )

    # -- discovery -------------------------------------------------------------------------------------------------

    def prepare(self) -> tuple[int, Path] | None:
        """Create ROOT, clean leftovers of interrupted saves (rank 0), and return the latest committed checkpoint."""
        self._check_ownership(self.root, tree=False)  # before anything is written there or restored into it
        error = None
        if self.rank == 0:
            try:
                self.root.mkdir(parents=True, exist_ok=True)
                for leftover in incomplete_entries(self.root):
                    log.warning("checkpoint: removing incomplete %s (no %s marker)", leftover, MARKER)
                    shutil.rmtree(leftover)
                self._replica.restore_if_newer(latest_complete(self.root))
            except OSError as failure:
                error = f"checkpoint.dir: {str(self.root)!r} cannot be prepared: {failure}"
            except CheckpointError as failure:
                error = str(failure)
        agreed = self._agree(error)
        if agreed is not None:
            raise CheckpointError(agreed)
        latest = latest_complete(self.root)
        if latest is not None:
            self._check_ownership(latest[1], tree=True)  # every file a resume loads, DCP's pickled .metadata first
        self._replica.catch_up(latest)
        return latest

    def _check_ownership(self, path: Path, tree: bool) -> None:
        """Rank 0 looks (ownership.py), every rank raises NotOwnedError together: a checkpoint root, step or file
        another user could have written is neither loaded nor written into."""
        error = None
        if self.rank == 0:
            try:
                if tree:
                    ownership.check_tree(path, "checkpoint")
                else:
                    ownership.check_if_present(path, "checkpoint.dir")
            except ownership.NotOwnedError as refused:
                error = str(refused)
            except OSError as failure:
                error = f"checkpoint.dir: {str(path)!r} cannot be inspected: {failure}"
        agreed = self._agree(error)
        if agreed is not None:
            raise ownership.NotOwnedError(agreed.removeprefix("rank 0: "))

    # -- saving ----------------------------------------------------------------------------------------------------

    def save(self, step: int, dcp_state: dict[str, Any], trainer_state: dict[str, Any], rng: dict[str, Any]) -> None:
        self.wait()  # also frees the space of checkpoints pruned last time before the free-space check
        final = step_dir(self.root, step)
        if final.joinpath(MARKER).is_file():
            return  # this exact step is already committed (e.g. a stop right after a periodic save)

        space_error = None
        if self.rank == 0:
            try:
                check_free_space(self.root, self.param_count, self.section.free_space_margin)
            except CheckpointSpaceError as failure:
                space_error = str(failure)
        agreed = self._agree(space_error)
        if agreed is not None:
            raise CheckpointSpaceError(agreed.removeprefix("rank 0: "))

        staging = tmp_dir(self.root, step)
        error = None
        if self.rank == 0:
            try:
                shutil.rmtree(staging, ignore_errors=True)
                (staging / RNG_DIR).mkdir(parents=True)
            except OSError as failure:
                error = describe_failure(failure)
        if (agreed := self._agree(error)) is not None:
            raise self._fail(step, "creating the directory", agreed)

        try:
            buffer = io.BytesIO()
            torch.save(rng, buffer)
            write_durably(staging / RNG_DIR / f"rank{self.rank}.pt", buffer.getvalue())
            if self.rank == 0:
                write_durably(staging / TRAINER_STATE, json.dumps(trainer_state, indent=1).encode())
            error = None
        except OSError as failure:
            error = describe_failure(failure)
        if (agreed := self._agree(error)) is not None:
            raise self._fail(step, "writing trainer state", agreed)

        writer = TensorFileWriter(staging, sync_files=True)
        try:
            if self._async_group is not None:
                future = dcp.async_save(dcp_state, storage_writer=writer, process_group=self._async_group)
                assert isinstance(future, Future)  # an AsyncSaveResponse comes only with an async_stager
                self._pending = _PendingSave(step, future, time.monotonic())
                return
            dcp.save(dcp_state, storage_writer=writer)
        except (CheckpointException, OSError, RuntimeError) as failure:
            raise self._fail(step, "writing shards", describe_failure(failure)) from None
        self._commit(step)

    def poll(self) -> int | None:
        """Commit a pending async save as soon as every rank's write has finished, as Megatron finalizes its async
        saves each iteration; returns the committed step, else None. Call on every rank at the same point of every
        step: nothing pending costs nothing, a pending save one one-integer gloo all-reduce (host to host)."""
        if self._pending is None or self._poll_group is None:
            return None
        done = torch.tensor([int(self._pending.future.done())], dtype=torch.int32)
        dist.all_reduce(done, op=dist.ReduceOp.MIN, group=self._poll_group)  # done only when done everywhere
        if not int(done.item()):
            return None
        step = self._pending.step
        self._finish_pending()
        return step

    def wait(self) -> None:
        """Finish a pending async save (wait for its shards, then commit it) and the deletion of pruned
        checkpoints. Call on every rank."""
        self._finish_pruning()
        self._finish_pending()

    def _finish_pending(self) -> None:
        pending, self._pending = self._pending, None
        if pending is None:
            return
        try:
            pending.future.result()
        except (CheckpointException, OSError, RuntimeError) as failure:
            raise self._fail(pending.step, "writing shards (async)", describe_failure(failure)) from None
        self._commit(pending.step)

    def _commit(self, step: int) -> None:
        staging, final = tmp_dir(self.root, step), step_dir(self.root, step)
        error = None
        if self.rank == 0:
            try:
                fsync_tree(staging)
                staging.rename(final)
                fsync_dir(self.root)
                write_durably(final / MARKER, json.dumps({"step": step}).encode())
                fsync_dir(final)
            except OSError as failure:
                shutil.rmtree(final, ignore_errors=True)
                error = describe_failure(failure)
        if (agreed := self._agree(error)) is not None:
            raise self._fail(step, "committing", agreed)
        if self.rank == 0:
            log.info("checkpoint: committed %s", final)
            self._replica.submit(step, final)
            self._prune()

    def _prune(self) -> None:
        """Un-commit the checkpoints beyond keep_last now, delete their files in the background: deleting a few GB
        takes a noticeable time on some filesystems, and training need not wait for it. A crash mid-delete leaves
        uncommitted leftovers, which the next start removes."""
        self._finish_pruning()
        committed = complete_checkpoints(self.root)
        doomed = []
        for _, path in committed[: max(0, len(committed) - self.section.keep_last)]:
            try:
                self._replica.release(path)
                uncommit(path)
                doomed.append(path)
            except OSError as failure:
                log.warning("checkpoint: could not remove old %s: %s", path, failure)
        if doomed:
            self._pruning = threading.Thread(target=_delete_all, args=(doomed,), name="checkpoint-prune")
            self._pruning.start()

    def finish_replica(self) -> None:
        """At the end of a run: wait until the last checkpoint's upload to the replica has been tried."""
        self._replica.finish()

    def _finish_pruning(self) -> None:
        pruning, self._pruning = self._pruning, None
        if pruning is not None:
            pruning.join()

    # -- loading ---------------------------------------------------------------------------------------------------

    def load(self, path: Path, dcp_state: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """Load model/optimizer shards into dcp_state's Statefuls; return (trainer state, this rank's RNG or None)."""
        reader = TensorFileReader(path, rank=self.rank)
        try:
            dcp.load(dcp_state, storage_reader=reader)
            trainer_state = json.loads((path / TRAINER_STATE).read_text(encoding="utf-8"))
        except (CheckpointException, OSError, RuntimeError, ValueError, KeyError) as failure:
            raise CheckpointError(f"checkpoint {path}: loading failed: {describe_failure(failure)}") from None
        finally:
            reader.stop_prefetch()  # when planning failed before any read
        return trainer_state, self._load_rng(path / RNG_DIR / f"rank{self.rank}.pt")

    @staticmethod
    def _load_rng(rng_path: Path) -> dict[str, Any] | None:
        """This rank's RNG state, or None (the trainer then reseeds). weights_only: tensors and plain values only,
        never code, even from a file that passed the ownership check (an RNG file of an older trainer, which held a
        numpy array, is not read: that resume reseeds)."""
        if not rng_path.is_file():
            return None
        try:
            state = torch.load(rng_path, weights_only=True)
        except pickle.UnpicklingError:
            log.warning("checkpoint: %s holds more than tensors and plain values: not loaded; reseeding", rng_path)
            return None
        return state if isinstance(state, dict) else None
