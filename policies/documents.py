"""Small helpers for IAM policy documents as plain dicts (what CloudFormation receives)."""

from __future__ import annotations

from typing import Any

PolicyDocument = dict[str, Any]
Statement = dict[str, Any]

# Actions a dataset grant consists of. Multipart uploads (Create/UploadPart/Complete) are
# authorized by s3:PutObject; an aborted upload needs its own action.
READ_OBJECT_ACTIONS: tuple[str, ...] = ("s3:GetObject",)
LIST_ACTIONS: tuple[str, ...] = ("s3:ListBucket",)
WRITE_OBJECT_ACTIONS: tuple[str, ...] = ("s3:PutObject", "s3:AbortMultipartUpload")


def document(*statements: Statement) -> PolicyDocument:
    return {"Version": "2012-10-17", "Statement": list(statements)}


def one_or_list(values: list[str] | tuple[str, ...]) -> str | list[str]:
    """IAM accepts a string or a list; a single value stays a string, as AWS renders it."""
    unique = list(dict.fromkeys(values))
    return unique[0] if len(unique) == 1 else unique


def statement(
    sid: str,
    effect: str,
    actions: list[str] | tuple[str, ...],
    resources: list[str] | tuple[str, ...],
    principal: Any = None,
    conditions: dict[str, dict[str, Any]] | None = None,
) -> Statement:
    body: Statement = {"Sid": sid, "Effect": effect}
    if principal is not None:
        body["Principal"] = principal
    body["Action"] = one_or_list(actions)
    body["Resource"] = one_or_list(resources)
    if conditions:
        body["Condition"] = conditions
    return body


def account_root(account: str) -> dict[str, str]:
    """A principal that S3 and KMS accept before the account's roles exist."""
    return {"AWS": f"arn:aws:iam::{account}:root"}


def object_arns(resource_arn: str, prefix: str) -> str:
    """Objects under `prefix` of a bucket ARN or an access point ARN (whose objects live under /object/)."""
    separator = "/object/" if ":accesspoint/" in resource_arn else "/"
    return f"{resource_arn}{separator}{prefix}*"
