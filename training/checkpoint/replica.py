"""A second copy of every committed checkpoint in S3, and the way back when the file system lost it.

Where: `$LLM_CHECKPOINT_REPLICA`, `s3://BUCKET/PREFIX/` with BUCKET a bucket name, an access point alias or an
access point ARN (`s3://arn:aws:s3:REGION:ACCOUNT:accesspoint/NAME/PREFIX/`); unset, there is no replica. boto3
finds the endpoint and credentials as it always does (the node's instance role; `AWS_ENDPOINT_URL_S3` for a
stand-in).

Layout under PREFIX: `slot-0/` and `slot-1/`, each one checkpoint's files (`step-N/`'s relative paths) and its
`MANIFEST.json` (step, then every file's size and sha256). A slot is overwritten in place: its manifest is first
replaced by one that says `writing`, then the files go up, each is read back (HEAD: its size), and the manifest
that says `complete` goes last. The other slot keeps the previous complete copy meanwhile, so a crash at any point
leaves at least one complete copy. Only PutObject is needed (no delete), and the bucket's versioning expires the
overwritten versions (`data.noncurrent_version_days`).

Rank 0 uploads in a background thread (`BackgroundUploader`), so the upload stays out of the training step; a newer
commit supersedes a queued older one. A failed upload is logged as an error with the reason and recorded in
`ROOT/replica.json`; training goes on with the file system as the only copy until the next commit's upload succeeds.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from training.checkpoint.layout import MARKER, fsync_dir, fsync_tree, step_dir, tmp_dir, write_durably
from training.checkpoint.replica_location import (
    ReplicaError,
    ReplicaTarget,
    ReplicaUnreachable,
    replica_from_env,
)
from training.stage import default_transfer_config, make_client

log = logging.getLogger("training")

MANIFEST = "MANIFEST.json"
STATUS_FILE = "replica.json"  # in the checkpoint root: the last upload's outcome
SLOTS = 2
FILES_AT_ONCE = 4


@dataclass(frozen=True)
class ReplicaCopy:
    step: int
    slot: int
    files: dict[str, dict[str, Any]]  # relative path -> {"size", "sha256"}
    # A framework's checkpoint (framework_replica.py): {"layout", "path" relative to the run directory}; None: ours.
    checkpoint: dict[str, str] | None = None
    already_held: bool = False  # upload() found the step in the replica and copied nothing


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while chunk := source.read(8 * 1024 * 1024):
            digest.update(chunk)
    return digest.hexdigest()


def _describe(error: BaseException) -> str:
    if isinstance(error, ClientError):
        info = error.response.get("Error", {})
        return f"{info.get('Code', 'error')}: {info.get('Message', '')}".rstrip(": ")
    return f"{type(error).__name__}: {error}"


class CheckpointReplica:
    """Upload, find and restore checkpoint copies under one S3 prefix (synchronous; see BackgroundUploader)."""

    def __init__(self, target: ReplicaTarget, client: Any = None) -> None:
        self.target = target
        self.client = client if client is not None else make_client(target.region, None, FILES_AT_ONCE * 4)
        self.transfer = default_transfer_config(max_concurrency=FILES_AT_ONCE * 4)

    def _key(self, slot: int, relative: str) -> str:
        return f"{self.target.prefix}slot-{slot}/{relative}"

    def _read_manifest(self, slot: int) -> dict[str, Any] | None:
        try:
            body = self.client.get_object(Bucket=self.target.bucket, Key=self._key(slot, MANIFEST))["Body"].read()
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise ReplicaUnreachable(
                f"{self.target.url}: cannot read slot-{slot}/{MANIFEST}: {_describe(error)}"
            ) from None
        except BotoCoreError as error:
            raise ReplicaUnreachable(
                f"{self.target.url}: cannot read slot-{slot}/{MANIFEST}: {_describe(error)}"
            ) from None
        try:
            manifest = json.loads(body)
        except ValueError:
            return None  # not ours, or cut short: not a complete copy
        return manifest if isinstance(manifest, dict) else None

    def copies(self) -> list[ReplicaCopy]:
        """The complete copies, oldest step first."""
        found = []
        for slot in range(SLOTS):
            manifest = self._read_manifest(slot)
            if manifest and manifest.get("state") == "complete" and isinstance(manifest.get("files"), dict):
                about = manifest.get("checkpoint")
                checkpoint = {str(k): str(v) for k, v in about.items()} if isinstance(about, dict) else None
                found.append(ReplicaCopy(int(manifest["step"]), slot, manifest["files"], checkpoint))
        return sorted(found, key=lambda copy: copy.step)

    def latest(self) -> ReplicaCopy | None:
        found = self.copies()
        return found[-1] if found else None

    def upload(self, step: int, path: Path, checkpoint: Mapping[str, str] | None = None) -> ReplicaCopy:
        """Copy the committed checkpoint at `path` into the slot that does not hold the newest complete copy;
        `checkpoint` (a framework's: its layout and place) goes into the manifest."""
        copies = self.copies()
        if any(copy.step == step for copy in copies):
            return dataclasses.replace(next(copy for copy in copies if copy.step == step), already_held=True)
        newest = copies[-1].slot if copies else SLOTS - 1
        slot = (newest + 1) % SLOTS
        local = sorted(p for p in path.rglob("*") if p.is_file() and p.name != MARKER)
        with ThreadPoolExecutor(FILES_AT_ONCE, thread_name_prefix="replica-hash") as pool:  # hashlib frees the GIL
            digests = list(pool.map(_sha256, local))
        files = {
            file.relative_to(path).as_posix(): {"size": file.stat().st_size, "sha256": digest}
            for file, digest in zip(local, digests, strict=True)
        }
        self._put_manifest(slot, {"state": "writing", "step": step})
        with ThreadPoolExecutor(FILES_AT_ONCE, thread_name_prefix="replica-put") as pool:
            list(pool.map(lambda relative: self._put_file(slot, path / relative, relative, files[relative]), files))
        about = {"checkpoint": dict(checkpoint)} if checkpoint else {}
        self._put_manifest(
            slot, {"state": "complete", "step": step, "files": files, **about, "uploaded_at": time.time()}
        )
        return ReplicaCopy(step, slot, files, dict(checkpoint) if checkpoint else None)

    def _put_manifest(self, slot: int, manifest: dict[str, Any]) -> None:
        key = self._key(slot, MANIFEST)
        try:
            self.client.put_object(Bucket=self.target.bucket, Key=key, Body=json.dumps(manifest, indent=1).encode())
        except (ClientError, BotoCoreError) as error:
            raise ReplicaError(
                f"{self.target.url}: writing slot-{slot}/{MANIFEST} failed: {_describe(error)}"
            ) from None

    def _put_file(self, slot: int, local: Path, relative: str, record: dict[str, Any]) -> None:
        key = self._key(slot, relative)
        try:
            self.client.upload_file(str(local), self.target.bucket, key, Config=self.transfer)
            stored = self.client.head_object(Bucket=self.target.bucket, Key=key)["ContentLength"]
        except (ClientError, BotoCoreError, OSError) as error:
            raise ReplicaError(
                f"{self.target.url}: uploading slot-{slot}/{relative} failed: {_describe(error)}"
            ) from None
        if stored != record["size"]:
            raise ReplicaError(
                f"{self.target.url}: slot-{slot}/{relative} holds {stored} bytes, {local} has {record['size']}"
            )

    def restore(self, copy: ReplicaCopy, root: Path, final: Path | None = None) -> Path:
        """Download `copy` as ROOT/step-N.tmp/, check every file's size and sha256 against the manifest, then commit
        it as a save does (rename, marker). A crash part-way leaves a .tmp directory, which the next start removes.
        With `final` (a framework's checkpoint directory) it is staged as a hidden sibling, `.NAME.restoring`, that no
        framework reads, and committed by the rename alone (no marker: the framework has its own)."""
        if final is not None:
            staging = final.parent / f".{final.name}.restoring"
            root = final.parent
        else:
            staging, final = tmp_dir(root, copy.step), step_dir(root, copy.step)
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        with ThreadPoolExecutor(FILES_AT_ONCE, thread_name_prefix="replica-get") as pool:
            list(pool.map(lambda item: self._get_file(copy, staging, *item), copy.files.items()))
        fsync_tree(staging)
        staging.rename(final)
        fsync_dir(root)
        if copy.checkpoint is None:
            write_durably(final / MARKER, json.dumps({"step": copy.step, "restored_from": self.target.url}).encode())
            fsync_dir(final)
        return final

    def _get_file(self, copy: ReplicaCopy, staging: Path, relative: str, record: dict[str, Any]) -> None:
        parts = Path(relative).parts
        if not parts or Path(relative).is_absolute() or ".." in parts:
            raise ReplicaError(
                f"{self.target.url}: slot-{copy.slot}/{MANIFEST} names {relative!r} outside the checkpoint"
            )
        local = staging / relative
        local.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.client.download_file(
                self.target.bucket, self._key(copy.slot, relative), str(local), Config=self.transfer
            )
        except (ClientError, BotoCoreError) as error:
            raise ReplicaError(
                f"{self.target.url}: downloading slot-{copy.slot}/{relative} failed: {_describe(error)}"
            ) from None
        size, digest = local.stat().st_size, _sha256(local)
        if (size, digest) != (record["size"], record["sha256"]):
            raise ReplicaError(
                f"{self.target.url}: slot-{copy.slot}/{relative} does not match its manifest (size {size}, sha256 "
                f"{digest[:12]}... against {record['size']}, {str(record['sha256'])[:12]}...)"
            )


class BackgroundUploader:
    """Rank 0's upload thread: one upload at a time, the newest commit waiting behind it (an older waiting one is
    dropped: its successor covers it). Failures are logged and recorded, never raised into training."""

    def __init__(
        self,
        replica: CheckpointReplica,
        root: Path,
        describe: Callable[[Path], Mapping[str, str] | None] | None = None,
    ) -> None:
        self.replica = replica
        self.root = root
        self.describe = describe  # a framework checkpoint's layout and place, for the manifest
        self._lock = threading.Condition()
        self._next: tuple[int, Path] | None = None
        self._current: Path | None = None
        self._thread: threading.Thread | None = None

    def submit(self, step: int, path: Path) -> None:
        with self._lock:
            self._next = (step, path)
            if self._thread is None or not self._thread.is_alive():
                # A daemon: a stop signal's exit must not wait for an upload; the next start uploads what is missing.
                self._thread = threading.Thread(target=self._run, name="checkpoint-replica", daemon=True)
                self._thread.start()
            self._lock.notify_all()

    def release(self, path: Path) -> None:
        """Before `path` is deleted: wait while it is being uploaded, and drop it if it is waiting."""
        with self._lock:
            if self._next is not None and self._next[1] == path:
                self._next = None
            while self._current == path:
                self._lock.wait()

    def finish(self) -> None:
        """Wait until every submitted checkpoint has been tried (the end of a run)."""
        with self._lock:
            while self._next is not None or self._current is not None:
                self._lock.wait()

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._next is None:
                    self._thread = None
                    self._lock.notify_all()
                    return
                (step, path), self._next = self._next, None
                self._current = path
            self._upload(step, path)
            with self._lock:
                self._current = None
                self._lock.notify_all()

    def _upload(self, step: int, path: Path) -> None:
        started = time.monotonic()
        try:
            copy = self.replica.upload(step, path, self.describe(path) if self.describe else None)
        except (ReplicaError, OSError) as error:
            message = str(error) if isinstance(error, ReplicaError) else _describe(error)
            log.error(
                "replica: step-%d NOT copied to %s: %s; training goes on, the file system holds the only copy until "
                "a later checkpoint's upload succeeds",
                step,
                self.replica.target.url,
                message,
            )
            self._record({"step": step, "ok": False, "error": message})
            return
        seconds = time.monotonic() - started
        size = sum(int(record["size"]) for record in copy.files.values())
        if copy.already_held:  # a requeued job's first pass over a checkpoint an earlier attempt copied
            log.info(
                "replica: step-%d is already in %sslot-%d/; nothing copied", step, self.replica.target.url, copy.slot
            )
            self._record({"step": step, "ok": True, "slot": copy.slot, "bytes": size, "seconds": 0.0})
            return
        log.info(
            "replica: step-%d copied to %sslot-%d/ (%d files, %.1f MB, sizes checked) in %.1f s",
            step,
            self.replica.target.url,
            copy.slot,
            len(copy.files),
            size / 1e6,
            seconds,
        )
        self._record({"step": step, "ok": True, "slot": copy.slot, "bytes": size, "seconds": round(seconds, 3)})

    def _record(self, outcome: dict[str, Any]) -> None:
        try:
            write_durably(self.root / STATUS_FILE, json.dumps({"url": self.replica.target.url, **outcome}).encode())
        except OSError as error:
            log.warning("replica: cannot record the upload's outcome in %s: %s", self.root / STATUS_FILE, error)


def restore_if_newer(replica: CheckpointReplica, root: Path, local_step: int | None) -> Path | None:
    """Restore the replica's newest copy when the file system has no checkpoint that recent; return its path."""
    newest = replica.latest()
    if newest is None or (local_step is not None and local_step >= newest.step):
        return None
    log.warning(
        "checkpoint: %s has no checkpoint at or after step %d (latest here: %s); restoring it from %sslot-%d/",
        root,
        newest.step,
        "none" if local_step is None else f"step-{local_step}",
        replica.target.url,
        newest.slot,
    )
    started = time.monotonic()
    path = replica.restore(newest, root)
    log.info("checkpoint: restored %s from the replica in %.1f s", path, time.monotonic() - started)
    return path


class ReplicaSync:
    """What CheckpointManager calls: restore at start, upload after each commit. Every call does nothing on ranks
    other than 0 and when no replica is configured."""

    def __init__(self, root: Path, replica: CheckpointReplica | None) -> None:
        self.root = root
        self.replica = replica
        self.uploader = BackgroundUploader(replica, root) if replica is not None else None

    @classmethod
    def from_env(cls, root: Path, rank: int, environ: Mapping[str, str] = os.environ) -> ReplicaSync:
        target = replica_from_env(environ)  # every rank checks the value, so a bad one stops all of them alike
        return cls(root, CheckpointReplica(target) if target is not None and rank == 0 else None)

    def restore_if_newer(self, latest_local: tuple[int, Path] | None) -> Path | None:
        if self.replica is None:
            return None
        try:
            return restore_if_newer(self.replica, self.root, latest_local[0] if latest_local else None)
        except (ReplicaError, OSError) as error:
            if latest_local is None and not isinstance(error, ReplicaUnreachable):
                raise ReplicaError(
                    f"the file system has no checkpoint and the replica cannot be restored: {error}"
                ) from None
            if latest_local is None:
                # A first run in a cluster that cannot reach S3 (no endpoint, no credentials) must train; a lost file
                # system loses no copy by it: uploads never overwrite the slot holding the highest step, and the
                # next start that reaches the replica restores that copy, since it is newer.
                log.error(
                    "replica: %s; the file system has no checkpoint either: starting from step 0 (a later start "
                    "that reaches the replica restores a newer copy; llm-restore does it by hand)",
                    error,
                )
                return None
            log.error("replica: %s; resuming from %s on the file system", error, latest_local[1])
            return None

    def catch_up(self, latest_local: tuple[int, Path] | None) -> None:
        """A checkpoint committed before a stop may have had no time to go up: upload it unless the replica has it."""
        if latest_local is not None:
            self.submit(*latest_local)

    def submit(self, step: int, path: Path) -> None:
        if self.uploader is not None:
            self.uploader.submit(step, path)

    def release(self, path: Path) -> None:
        if self.uploader is not None:
            self.uploader.release(path)

    def finish(self) -> None:
        if self.uploader is not None:
            self.uploader.finish()
