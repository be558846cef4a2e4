"""The dataset bucket (data account) and the bucket its access logs go to."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from policies import bucket_policy
from spec import DeploymentSpec
from stacks.parts.access_log_bucket import access_log_bucket


class DatasetBucket(Construct):
    """SSE-KMS with Bucket Keys, Block Public Access, versioning, TLS only, access logs, lifecycle.

    Bucket Keys matter here: training reads millions of objects, and without them every GET is
    a KMS request (throttling and cost).
    """

    def __init__(self, scope: Construct, construct_id: str, spec: DeploymentSpec, key: kms.IKey) -> None:
        super().__init__(scope, construct_id)
        self.log_bucket = access_log_bucket(self, spec.data.log_bucket_name, spec.data.access_log_days)
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
                ),
                *_checkpoint_replica_rules(spec),
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


# A run's replica overwrites its two slots at every checkpoint (training/checkpoint/replica.py); kept for
# data.noncurrent_version_days, the overwritten versions of an 8B run would add up to a hundred TB a month. The two
# current slots are the copies that count, so an overwritten one is kept a day only.
CHECKPOINT_NONCURRENT_DAYS = 1


def _checkpoint_replica_rules(spec: DeploymentSpec) -> list[s3.LifecycleRule]:
    dataset = spec.checkpoint_dataset
    if dataset is None or dataset.output_prefix is None:
        return []
    return [
        s3.LifecycleRule(
            id="expire-overwritten-checkpoint-copies",
            prefix=dataset.output_prefix,
            noncurrent_version_expiration=Duration.days(CHECKPOINT_NONCURRENT_DAYS),
            abort_incomplete_multipart_upload_after=Duration.days(1),
        )
    ]
