"""The compute account's artifacts bucket (spec.artifacts): what the nodes install from without internet, the
bucket its access logs go to, and the node roles' read grants on it."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from policies.artifacts import (
    ARTIFACTS_POLICY_NAME,
    artifact_readers,
    artifacts_bucket_policy,
    artifacts_read_policy,
)
from spec import DeploymentSpec
from spec.artifacts import artifacts_bucket_name
from stacks.nag.acknowledge import acknowledge, wildcard_resources
from stacks.parts.access_log_bucket import access_log_bucket


class ArtifactsBucket(Construct):
    """Block Public Access, versioning, TLS only, bucket owner enforced, access logs, retained like the datasets.

    SSE-S3 rather than KMS: the content is public wheels and upstream binaries (no secrets), and a key would put a
    KMS grant and the kms endpoint into every node's boot. Writes come only from `make upload-artifacts` with the
    operator's credentials; the nodes read their folders only (policies.artifacts, policies.endpoint).
    """

    def __init__(self, scope: Construct, construct_id: str, spec: DeploymentSpec) -> None:
        super().__init__(scope, construct_id)
        name = artifacts_bucket_name(spec)
        self.log_bucket = access_log_bucket(self, f"{name}-logs", spec.data.access_log_days)
        self.bucket = s3.Bucket(
            self,
            "Artifacts",
            bucket_name=name,
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            versioned=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            server_access_logs_bucket=self.log_bucket,
            server_access_logs_prefix=f"{name}/",
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-noncurrent-versions",
                    # A re-upload replaces wheels; the old versions stay as long as the datasets' do.
                    noncurrent_version_expiration=Duration.days(spec.data.noncurrent_version_days),
                    abort_incomplete_multipart_upload_after=Duration.days(7),
                )
            ],
            removal_policy=RemovalPolicy.RETAIN,
        )
        # Exactly policies.artifacts.artifacts_bucket_policy(spec): TLS only, the organization's principals only.
        self.policy = s3.CfnBucketPolicy(self, "Policy", bucket=name, policy_document=artifacts_bucket_policy(spec))
        self.policy.add_resource_dependency(self.bucket.node.default_child)  # type: ignore[arg-type]
        # The node roles' read grants, attached by role name (the roles live in the identity stack).
        self.read_policies: list[iam.CfnPolicy] = []
        for role in artifact_readers(spec):
            document = artifacts_read_policy(spec, role)
            if document is None:
                continue
            policy = iam.CfnPolicy(
                self,
                f"Read-{role}",
                policy_name=ARTIFACTS_POLICY_NAME,
                roles=[spec.role_name(role)],
                policy_document=document,
            )
            acknowledge(
                policy,
                "IAM5",
                "Each wildcard is one artifact folder of the spec (key prefix ending in '/', then '*'): the node "
                "reads the wheels and binaries under it, nothing beside it, and writes nothing.",
                applies_to=wildcard_resources(document),
            )
            self.read_policies.append(policy)
