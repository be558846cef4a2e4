"""Where a run's checkpoint replica lives in S3, named without boto3: llm-submit renders it on a head node whose
environment (requirements-submit.txt) has no AWS SDK; training/checkpoint/replica.py reads and writes it."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from training.checkpoint.errors import CheckpointError

REPLICA_ENV = "LLM_CHECKPOINT_REPLICA"
_URL = re.compile(
    r"^s3://(?P<bucket>arn:aws[a-z-]*:s3:(?P<region>[a-z0-9-]+):\d{12}:accesspoint/[a-z0-9][a-z0-9-]{1,48}[a-z0-9]"
    r"|[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/(?P<prefix>(?:[A-Za-z0-9!_.*'()=+-]+/)+)$"
)


class ReplicaError(CheckpointError):
    """The replica cannot be read or written; the message is one line naming the S3 location."""


class ReplicaUnreachable(ReplicaError):
    """S3 gave no answer about the replica (no endpoint, no credentials, no bucket, access denied)."""


@dataclass(frozen=True)
class ReplicaTarget:
    bucket: str  # boto3's Bucket: a name, an access point alias or an access point ARN
    prefix: str  # ends with "/"
    region: str | None  # the access point ARN's, else the environment's

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"


def parse_replica_url(url: str) -> ReplicaTarget:
    match = _URL.match(url)
    if match is None:
        raise ReplicaError(
            f"{REPLICA_ENV}: {url!r} is not s3://BUCKET/PREFIX/ (BUCKET a bucket name, an access point alias or "
            "arn:aws:s3:REGION:ACCOUNT:accesspoint/NAME; PREFIX non-empty and ending with /)"
        )
    region = match["region"] or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    return ReplicaTarget(match["bucket"], match["prefix"], region)


def replica_url(base: str, run_dir: Path) -> str:
    """A run's replica: the base (s3://BUCKET/PREFIX/) plus the run directory's absolute path, so that two runs never
    share one, and the same command after a lost file system finds its own."""
    url = f"{base}{str(run_dir.absolute()).strip('/')}/"
    try:
        parse_replica_url(url)
    except ReplicaError:
        raise ReplicaError(
            f"--run-dir: {str(run_dir)!r} cannot name an S3 prefix (letters, digits and !_.*'()=+- between slashes)"
        ) from None
    return url


def replica_from_env(environ: Mapping[str, str] = os.environ) -> ReplicaTarget | None:
    url = environ.get(REPLICA_ENV, "").strip()
    return parse_replica_url(url) if url else None
