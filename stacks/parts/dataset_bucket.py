"""The dataset bucket (data account) and the bucket its access logs go to."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from policies import bucket_policy
from spec import DeploymentSpec
from stacks.parts.nag import acknowledge


class DatasetBucket(Construct):
    """SSE-KMS with Bucket Keys, Block Public Access, versioning, TLS only, access logs, lifecycle.

    Bucket Keys matter here: training reads millions of objects, and without them every GET is
    a KMS request (throttling and cost).
    """

    def __init__(self, scope: Construct, construct_id: str, spec: DeploymentSpec, key: kms.IKey) -> None:
        super().__init__(scope, construct_id)
        self.log_bucket = s3.Bucket(
            self,
            "AccessLogs",
            bucket_name=spec.data.log_bucket_name,
            # Server access logs can only be delivered to SSE-S3 buckets.
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            versioned=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-access-logs",
                    expiration=Duration.days(spec.data.access_log_days),
                    # A log deleted or overwritten by someone covering tracks stays recoverable as long as
                    # the log itself would have been kept.
                    noncurrent_version_expiration=Duration.days(spec.data.access_log_days),
                )
            ],
            removal_policy=RemovalPolicy.RETAIN,
        )
        acknowledge(
            self.log_bucket,
            "S1",
            "This is the access-log bucket itself; logging it into itself would loop and another log bucket "
            "would only move the question.",
        )
        self.bucket = s3.Bucket(
            self,
            "Datasets",
            bucket_name=spec.data.bucket_name,
            encryption=s3.BucketEncryption.KMS,
            encryption_key=key,
            bucket_key_enabled=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            versioned=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            server_access_logs_bucket=self.log_bucket,
            server_access_logs_prefix=f"{spec.data.bucket_name}/",
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-noncurrent-versions",
                    noncurrent_version_expiration=Duration.days(spec.data.noncurrent_version_days),
                    abort_incomplete_multipart_upload_after=Duration.days(7),
                )
            ],
            removal_policy=RemovalPolicy.RETAIN,
        )
        # The bucket policy is exactly policies.bucket_policy(spec, key ARN): TLS deny, delegation to the
        # spec's access points, the dataset key on every write, the organization perimeter; it grants
        # nothing else.
        # The bucket is named by its literal name, as in the policy's ARNs (and as cdk-nag matches them);
        # the explicit dependency replaces the one a Ref would have given.
        self.policy = s3.CfnBucketPolicy(
            self, "Policy", bucket=spec.data.bucket_name, policy_document=bucket_policy(spec, key.key_arn)
        )
        self.policy.add_resource_dependency(self.bucket.node.default_child)  # type: ignore[arg-type]
