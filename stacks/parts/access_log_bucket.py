"""The bucket a bucket's server access logs go to: the same controls for every bucket this repo makes."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_s3 as s3
from constructs import Construct

from stacks.nag.acknowledge import acknowledge


def access_log_bucket(scope: Construct, bucket_name: str, retention_days: int) -> s3.Bucket:
    """`AccessLogs` in `scope`: SSE-S3, Block Public Access, TLS only, versioned, owner-enforced, retained, logs
    (and their overwritten versions) kept `retention_days`."""
    bucket = s3.Bucket(
        scope,
        "AccessLogs",
        bucket_name=bucket_name,
        # Server access logs can only be delivered to SSE-S3 buckets.
        encryption=s3.BucketEncryption.S3_MANAGED,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        enforce_ssl=True,
        versioned=True,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        lifecycle_rules=[
            s3.LifecycleRule(
                id="expire-access-logs",
                expiration=Duration.days(retention_days),
                # A log deleted or overwritten by someone covering tracks stays recoverable as long as the log
                # itself would have been kept.
                noncurrent_version_expiration=Duration.days(retention_days),
            )
        ],
        removal_policy=RemovalPolicy.RETAIN,
    )
    acknowledge(
        bucket,
        "S1",
        "This is the access-log bucket itself; logging it into itself would loop and another log bucket "
        "would only move the question.",
    )
    return bucket
