"""Empty a versioned bucket the stacks retain, so that `aws s3api delete-bucket` can then remove it.

    python -m cluster.empty_bucket NAME --profile data [--region us-east-1] [--yes]

`aws s3 rm --recursive` only hides the objects of a versioned bucket behind delete markers, and delete-bucket
refuses a bucket that still holds any version. This deletes every object version and every delete marker, a
thousand per request (DeleteObjects' limit). Without --yes it counts what it would delete and deletes nothing.
README, Tearing down, names it for the dataset, artifacts and access-log buckets.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from spec.cli import OneLineParser, user_errors
from spec.cli_types import profile_name
from spec.errors import UserError

DELETE_BATCH = 1000  # DeleteObjects takes at most 1,000 keys per request


@dataclass(frozen=True)
class Version:
    key: str
    version_id: str
    delete_marker: bool


def versions(s3: Any, bucket: str) -> Iterator[Version]:
    """Every object version and delete marker of the bucket (a bucket never versioned lists its objects as version
    'null')."""
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
        for entry in page.get("Versions", []):
            yield Version(entry["Key"], entry["VersionId"], False)
        for entry in page.get("DeleteMarkers", []):
            yield Version(entry["Key"], entry["VersionId"], True)


def batches(items: list[Version], size: int = DELETE_BATCH) -> Iterator[list[Version]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def delete_all(s3: Any, bucket: str, found: list[Version]) -> None:
    for batch in batches(found):
        answer = s3.delete_objects(
            Bucket=bucket,
            Delete={"Objects": [{"Key": v.key, "VersionId": v.version_id} for v in batch], "Quiet": True},
        )
        errors = answer.get("Errors") or []
        if errors:
            first = errors[0]
            raise UserError(
                f"{bucket}: {len(errors)} of {len(batch)} deletions refused, first {first.get('Key')!r} version "
                f"{first.get('VersionId')!r}: {first.get('Code')}: {first.get('Message')}"
            )


def s3_client(profile: str | None, region: str | None) -> Any:
    import boto3
    import botocore.exceptions

    try:
        return boto3.Session(profile_name=profile, region_name=region).client("s3")
    except botocore.exceptions.ProfileNotFound:
        raise UserError(f"--profile: {profile!r} is not a profile of the AWS CLI's config") from None


def summary(found: list[Version]) -> str:
    markers = sum(1 for v in found if v.delete_marker)
    return f"{len(found) - markers} object versions and {markers} delete markers"


@user_errors
def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="llm-empty-bucket", description=__doc__.splitlines()[0])
    parser.add_argument("bucket", help="the bucket's name (not an s3:// URI)")
    parser.add_argument(
        "--profile", type=profile_name, help="AWS CLI profile of the bucket's account (default: the environment's)"
    )
    parser.add_argument("--region", help="the bucket's region (default: the profile's)")
    parser.add_argument("--yes", action="store_true", help="delete them (without it: count only)")
    args = parser.parse_args(argv)
    if args.bucket.startswith("s3://") or "/" in args.bucket:
        raise UserError(f"bucket: {args.bucket!r} is not a bucket name (give NAME, not s3://NAME/...)")
    import botocore.exceptions

    s3 = s3_client(args.profile, args.region)
    try:
        found = list(versions(s3, args.bucket))
        if not args.yes:
            print(f"s3://{args.bucket} holds {summary(found)}; --yes deletes them")
            return 0
        delete_all(s3, args.bucket, found)
    except botocore.exceptions.ClientError as failure:
        error = failure.response.get("Error", {})
        raise UserError(f"bucket: {args.bucket!r}: {error.get('Code')}: {error.get('Message')}") from None
    except botocore.exceptions.BotoCoreError as failure:
        raise UserError(f"bucket: {args.bucket!r}: {failure}") from None
    print(f"s3://{args.bucket}: deleted {summary(found)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
