"""Copy a dataset prefix from an S3 access point to local disk or FSx, resumably, then verify it.

    python -m training.stage --access-point-arn arn:aws:s3:us-east-1:222222222222:accesspoint/llm-data \\
        --prefix datasets/demo/ --dest /fsx/data

Uses boto3's transfer manager (ranged multipart GETs, many in parallel). A file already at the destination with
the object's size is skipped; others are downloaded to `<name>.partial` and renamed when complete, so an
interrupted run resumes where it stopped. Afterwards every manifest in the prefix is checked: sha256 of the
.bin, .idx and tokenizer, and the .idx structure against the .bin. A file that fails is deleted so a rerun
fetches it again.
"""

import argparse
import os
import re
import sys
from collections.abc import Callable, Generator, Sequence
from contextlib import ExitStack, closing
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

import boto3
from boto3.s3.transfer import TransferConfig, create_transfer_manager
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from tqdm import tqdm

from spec.cli import OneLineParser, user_errors
from spec.cli_types import http_url, output_directory
from training.data.errors import DataError
from training.data.manifest import FileRecord, read_manifest, sha256_file
from training.data.verify import verify_dataset

MIB = 1024 * 1024
ACCESS_POINT_ARN = re.compile(
    r"^arn:aws[a-z-]*:s3:(?P<region>[a-z0-9-]+):\d{12}:accesspoint/[a-z0-9][a-z0-9-]{1,48}[a-z0-9]$"
)
# Plain bucket names (and access point aliases, which S3 accepts wherever a bucket name goes).
BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
PARTIAL_SUFFIX = ".partial"
MANIFEST_SUFFIX = ".manifest.json"
FILES_IN_FLIGHT_PER_THREAD = 2  # open .partial handles at once, relative to max_concurrency


class StageError(RuntimeError):
    """Staging failed; the message is one line naming the object or file."""


@dataclass(frozen=True)
class RemoteObject:
    key: str
    size: int
    relative: PurePosixPath  # where it lands below the destination directory


@dataclass
class StageResult:
    downloaded: list[str] = field(default_factory=list)  # relative paths
    skipped: list[str] = field(default_factory=list)  # already complete at the destination
    verified: list[str] = field(default_factory=list)  # dataset prefixes whose manifest checked out


def parse_bucket(access_point_arn: str) -> tuple[str, str | None]:
    """(value for boto3's Bucket parameter, region named by the ARN or None)."""
    match = ACCESS_POINT_ARN.match(access_point_arn)
    if match:
        return access_point_arn, match["region"]
    if access_point_arn.startswith("arn:") or not BUCKET_NAME.match(access_point_arn):
        raise StageError(
            f"--access-point-arn: {access_point_arn!r} is neither an S3 access point ARN "
            "(arn:aws:s3:REGION:ACCOUNT:accesspoint/NAME) nor a bucket name or access point alias"
        )
    return access_point_arn, None


def make_client(region: str | None, endpoint_url: str | None, max_concurrency: int) -> Any:
    config = Config(
        retries={"max_attempts": 10, "mode": "adaptive"},
        max_pool_connections=max_concurrency + 4,
        s3={"use_arn_region": True},
    )
    return boto3.client("s3", region_name=region or "us-east-1", endpoint_url=endpoint_url, config=config)


def list_objects(client: Any, bucket: str, prefix: str) -> list[RemoteObject]:
    """Every object under the prefix, placed relative to the prefix's directory part (what follows the last /)."""
    base = prefix.rsplit("/", 1)[0] + "/" if "/" in prefix else ""
    found = []
    try:
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                key = item["Key"]
                if key.endswith("/"):
                    continue  # a console-made "folder" marker, not data
                relative = PurePosixPath(key[len(base) :])
                if relative.is_absolute() or ".." in relative.parts or not relative.parts:
                    raise StageError(f"s3 key {key!r}: does not map to a path inside the destination")
                found.append(RemoteObject(key=key, size=int(item["Size"]), relative=relative))
    except ClientError as error:
        raise StageError(f"{bucket}/{prefix}: cannot list objects: {_client_error(error)}") from None
    if not found:
        raise StageError(f"{bucket}/{prefix}: no objects under this prefix")
    return found


def stage_prefix(
    client: Any,
    bucket: str,
    prefix: str,
    dest: str | Path,
    *,
    transfer_config: TransferConfig | None = None,
    on_file_done: Callable[[str], None] | None = None,
    show_progress: bool | None = None,
) -> StageResult:
    """Download what is missing, then verify every dataset manifest found; see the module docstring."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    config = transfer_config or default_transfer_config()
    objects = list_objects(client, bucket, prefix)
    result = StageResult()
    missing = []
    for remote in objects:
        local = dest / remote.relative
        if local.is_file() and local.stat().st_size == remote.size:
            _partial_path(local).unlink(missing_ok=True)  # debris from a run that crashed before the rename
            result.skipped.append(str(remote.relative))
        else:
            missing.append(remote)
    if show_progress is None:
        show_progress = sys.stderr.isatty()
    with (
        tqdm(total=sum(r.size for r in missing), unit="B", unit_scale=True, disable=not show_progress) as progress,
        closing(_download(client, bucket, dest, missing, config, progress)) as downloads,
    ):
        for remote in downloads:
            result.downloaded.append(str(remote.relative))
            if on_file_done is not None:
                on_file_done(str(remote.relative))
    result.verified = verify_staged(dest, objects)
    return result


def default_transfer_config(
    max_concurrency: int = 16, multipart_chunksize: int = 64 * MIB, multipart_threshold: int = 64 * MIB
) -> TransferConfig:
    # "classic": the CRT client, when installed, ignores these settings.
    return TransferConfig(
        multipart_threshold=multipart_threshold,
        multipart_chunksize=multipart_chunksize,
        max_concurrency=max_concurrency,
        use_threads=True,
        preferred_transfer_client="classic",
    )


def _download(
    client: Any, bucket: str, dest: Path, objects: list[RemoteObject], config: TransferConfig, progress: tqdm
) -> Generator[RemoteObject, None, None]:
    """Yield each object once it is complete and renamed into place; a bounded number are open at a time."""
    window = max(1, config.max_request_concurrency * FILES_IN_FLIGHT_PER_THREAD)
    handles: dict[str, BinaryIO] = {}
    # Leaving the manager's block by an exception (including GeneratorExit when the caller stops early) cancels
    # the transfers still running and waits for them; only then are their .partial handles closed.
    with ExitStack() as cleanup:
        cleanup.callback(lambda: [handle.close() for handle in handles.values()])
        manager = cleanup.enter_context(create_transfer_manager(client, config))
        pending: list[tuple[RemoteObject, Any]] = []
        queue = list(objects)
        while queue or pending:
            while queue and len(pending) < window:
                remote = queue.pop(0)
                partial = _partial_path(dest / remote.relative)
                partial.parent.mkdir(parents=True, exist_ok=True)
                handles[remote.key] = partial.open("wb")
                subscribers = [_ProgressSubscriber(progress)]
                pending.append(
                    (remote, manager.download(bucket, remote.key, handles[remote.key], subscribers=subscribers))
                )
            remote, future = pending.pop(0)
            try:
                future.result()
            except ClientError as error:
                raise StageError(f"{bucket}/{remote.key}: download failed: {_client_error(error)}") from None
            handle = handles.pop(remote.key)
            handle.flush()
            os.fsync(handle.fileno())
            handle.close()
            _finish(dest / remote.relative, remote)
            yield remote


def _finish(local: Path, remote: RemoteObject) -> None:
    partial = _partial_path(local)
    size = partial.stat().st_size
    if size != remote.size:
        raise StageError(f"{local}: downloaded {size} bytes, but the object {remote.key} has {remote.size}")
    os.replace(partial, local)


def _partial_path(local: Path) -> Path:
    return local.with_name(local.name + PARTIAL_SUFFIX)


class _ProgressSubscriber:
    """s3transfer calls on_progress from its worker threads with byte counts."""

    def __init__(self, progress: tqdm) -> None:
        self._progress = progress

    def on_queued(self, **kwargs: Any) -> None:
        pass

    def on_progress(self, bytes_transferred: int, **kwargs: Any) -> None:
        self._progress.update(bytes_transferred)

    def on_done(self, **kwargs: Any) -> None:
        pass


def verify_staged(dest: Path, objects: list[RemoteObject]) -> list[str]:
    """Check every manifest among the staged objects; corrupt files are deleted so a rerun fetches them again."""
    verified: list[str] = []
    problems: list[str] = []
    for remote in objects:
        if remote.relative.name.endswith(MANIFEST_SUFFIX):
            manifest_problems = _verify_manifest(dest / remote.relative)
            if not manifest_problems:
                verified.append(str(remote.relative)[: -len(MANIFEST_SUFFIX)])
            problems.extend(manifest_problems)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise StageError(
            f"verification failed: {problems[0]}{more}; rerun to fetch deleted files again, "
            "and if it fails again the source objects differ from their manifest"
        )
    return verified


def _verify_manifest(manifest_file: Path) -> list[str]:
    try:
        manifest = read_manifest(manifest_file)
    except DataError as error:
        return [str(error)]
    records = [(record, True) for record in manifest.files()]
    if manifest.tokenizer_file:
        # Optional in the prefix (the trainer may get the tokenizer elsewhere), checked when it is there.
        records.append((FileRecord(manifest.tokenizer_file, -1, manifest.tokenizer_sha256), False))
    problems = []
    for record, required in records:
        local = manifest_file.parent / record.name
        if not local.is_file():
            if required:
                problems.append(f"{local}: listed in {manifest_file.name} but not in the prefix")
            continue
        actual = sha256_file(local)
        if actual != record.sha256:
            local.unlink()
            problems.append(f"{local}: sha256 mismatch: manifest expects {record.sha256}, found {actual}; deleted")
    if not problems:
        try:
            verify_dataset(str(manifest_file)[: -len(MANIFEST_SUFFIX)])
        except DataError as error:
            problems.append(str(error))
    return problems


def _client_error(error: ClientError) -> str:
    details = error.response.get("Error", {})
    return f"{details.get('Code', 'error')}: {details.get('Message', str(error))}"


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m training.stage", description=__doc__.split("\n\n")[0])
    parser.add_argument("--access-point-arn", required=True, help="S3 access point ARN (a bucket name also works)")
    parser.add_argument("--prefix", required=True, help="key prefix of the dataset, e.g. datasets/demo/")
    parser.add_argument(
        "--dest", required=True, type=lambda text: str(output_directory(text)), help="local or FSx directory"
    )
    parser.add_argument("--region", help="defaults to the ARN's region")
    parser.add_argument("--endpoint-url", type=http_url, help="S3 endpoint (an interface endpoint, or a test server)")
    parser.add_argument("--max-concurrency", type=int, default=16, help="parallel ranged GETs")
    parser.add_argument("--multipart-chunksize-mib", type=int, default=64, help="size of each ranged GET")
    return parser


@user_errors
def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        for name in ("max_concurrency", "multipart_chunksize_mib"):
            if getattr(args, name) < 1:
                raise StageError(f"--{name.replace('_', '-')}: {getattr(args, name)} must be >= 1")
        bucket, arn_region = parse_bucket(args.access_point_arn)
        client = make_client(args.region or arn_region, args.endpoint_url, args.max_concurrency)
        chunk = args.multipart_chunksize_mib * MIB
        config = default_transfer_config(args.max_concurrency, chunk, chunk)
        result = stage_prefix(client, bucket, args.prefix, args.dest, transfer_config=config)
    except (StageError, BotoCoreError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(
        f"staged {args.prefix} into {args.dest}: {len(result.downloaded)} downloaded, {len(result.skipped)} already "
        f"complete; verified {', '.join(result.verified) or 'no manifests found'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
