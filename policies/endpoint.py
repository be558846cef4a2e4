"""S3 gateway endpoint policy of the compute VPC.

Requests through an access point are authorized against BOTH the access point ARN and the
bucket ARN at the endpoint, so both are listed. Everything else the nodes need from S3 without
internet is named explicitly, each bucket with the reason it is there, instead of falling back
to "*" (which would let any credential in the VPC copy data to any bucket in the world).
"""

from __future__ import annotations

from dataclasses import dataclass

from policies.documents import (
    LIST_ACTIONS,
    READ_OBJECT_ACTIONS,
    WRITE_OBJECT_ACTIONS,
    PolicyDocument,
    Statement,
    document,
    statement,
)
from spec.artifacts import artifact_locations
from spec.model import DeploymentSpec


@dataclass(frozen=True)
class AwsOwnedBucket:
    pattern: str  # bucket ARN with {region}
    reason: str
    writable: bool = False


# Every name is exact: a wildcard inside a bucket name would let anyone register a matching bucket and
# receive what the VPC sends there. Not listed because nothing in the VPC needs them: Amazon Linux 2
# repositories (no supported cluster OS is AL2), SSM Distributor and Patch Manager buckets (not used), and
# CloudFormation's custom-resource response bucket, `cloudformation-custom-resource-response-<region
# without dashes>` (no Lambda of ParallelCluster's provider or cluster stacks runs in the VPC).
AWS_OWNED_BUCKETS: tuple[AwsOwnedBucket, ...] = (
    AwsOwnedBucket(
        "arn:aws:s3:::{region}-aws-parallelcluster/*",
        "ParallelCluster's regional bucket: node cookbook, packages and templates fetched at boot.",
    ),
    AwsOwnedBucket(
        "arn:aws:s3:::prod-{region}-starport-layer-bucket/*",
        "ECR stores image layers here: enroot/pyxis container pulls through the ecr.dkr endpoint.",
    ),
    AwsOwnedBucket(
        "arn:aws:s3:::al2023-repos-{region}-de612dc2/*",
        "Amazon Linux 2023 package repositories (dnf) on the nodes.",
    ),
    AwsOwnedBucket("arn:aws:s3:::amazon-ssm-{region}/*", "SSM Agent updates (Session Manager is the way in)."),
    AwsOwnedBucket("arn:aws:s3:::aws-ssm-{region}/*", "SSM documents and plugins for Run Command."),
    AwsOwnedBucket("arn:aws:s3:::aws-ssm-document-attachments-{region}/*", "SSM document attachments."),
    AwsOwnedBucket(
        "arn:aws:s3:::cloudformation-waitcondition-{region}/*",
        "cfn-signal answers ParallelCluster's HeadNodeWaitCondition through a pre-signed URL here.",
        writable=True,
    ),
)


def aws_owned_bucket_arns(region: str, writable: bool) -> list[str]:
    return [b.pattern.format(region=region) for b in AWS_OWNED_BUCKETS if b.writable == writable]


def parallelcluster_bucket_statement(spec: DeploymentSpec, conditions: dict[str, dict[str, object]]) -> Statement:
    """ParallelCluster's bucket in the compute account, only this cluster's artifact directory: the nodes
    read their config by version (s3:GetObjectVersion) and locate and list the directory; nothing writes."""
    from policies.cluster_nodes import CLUSTER_BUCKET, cluster_artifact_prefix  # cluster_nodes imports this module

    bucket = f"arn:aws:s3:::{CLUSTER_BUCKET}"
    return statement(
        "ParallelClusterBuckets",
        "Allow",
        ["s3:GetObject", "s3:GetObjectVersion", "s3:ListBucket", "s3:GetBucketLocation"],
        [bucket, f"{bucket}/{cluster_artifact_prefix(spec)}/*"],
        "*",
        conditions,
    )


def compute_account_read_only_bucket_arns(spec: DeploymentSpec) -> list[str]:
    """Buckets of the compute account the nodes only read from inside the VPC."""
    account, region = spec.accounts.compute, spec.region
    buckets = [
        # CDK asset bucket: bootstrap scripts and the training package are assets.
        f"arn:aws:s3:::cdk-*-assets-{account}-{region}",
        f"arn:aws:s3:::cdk-*-assets-{account}-{region}/*",
    ]
    # The nodes' offline artifacts (spec.artifacts): the artifacts bucket's wheelhouse (with the exporters'
    # binaries in its observability/) and NxDT folders, or the spec's own bucket for either; folders, not buckets.
    for folder in artifact_locations(spec).folders:
        buckets += [folder.bucket_arn, folder.objects_arn]
    return list(dict.fromkeys(buckets))


def gateway_endpoint_policy(spec: DeploymentSpec) -> PolicyDocument:
    access_points = [spec.access_point_arn(d) for d in spec.data.datasets]
    dataset_resources = [
        *access_points,
        *(f"{ap}/object/*" for ap in access_points),
        spec.bucket_arn,
        f"{spec.bucket_arn}/*",
    ]
    has_writers = any(d.writers for d in spec.data.datasets)
    dataset_actions = [*READ_OBJECT_ACTIONS, *LIST_ACTIONS, *(WRITE_OBJECT_ACTIONS if has_writers else ())]
    org = {"StringEquals": {"aws:PrincipalOrgID": spec.organization_id}} if spec.perimeter.organization_bound else None

    own_conditions: dict[str, dict[str, object]] = {"StringEquals": {"aws:ResourceAccount": spec.accounts.compute}}
    if org:
        own_conditions["StringEquals"]["aws:PrincipalOrgID"] = spec.organization_id

    statements: list[Statement] = [
        # The plain "*" principal: an endpoint policy has no other meaningful principal form, and
        # {"AWS": "*"} is rejected by some evaluators of endpoint policies.
        statement("DatasetsThroughAccessPoints", "Allow", dataset_actions, dataset_resources, "*", org),
        statement(
            "ReadAwsOwnedBucketsNodesNeed",
            "Allow",
            READ_OBJECT_ACTIONS,
            aws_owned_bucket_arns(spec.region, writable=False),
            "*",
        ),
        statement(
            "SignalCloudFormation",
            "Allow",
            ["s3:PutObject"],
            aws_owned_bucket_arns(spec.region, writable=True),
            "*",
        ),
        parallelcluster_bucket_statement(spec, own_conditions),
        statement(
            "ReadComputeAccountDeploymentBuckets",
            "Allow",
            ["s3:GetObject", "s3:ListBucket", "s3:GetBucketLocation"],
            compute_account_read_only_bucket_arns(spec),
            "*",
            own_conditions,
        ),
    ]
    return document(*statements)


# What ParallelCluster's node daemons do with their cluster-state tables (policies.cluster_nodes).
DYNAMODB_TABLE_ACTIONS: tuple[str, ...] = (
    "dynamodb:GetItem",
    "dynamodb:BatchGetItem",
    "dynamodb:Query",
    "dynamodb:Scan",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:DescribeTable",
)


def dynamodb_endpoint_policy(spec: DeploymentSpec) -> PolicyDocument:
    """The DynamoDB gateway endpoint reaches only ParallelCluster's tables in the compute account."""
    conditions: dict[str, dict[str, object]] = {"StringEquals": {"aws:ResourceAccount": spec.accounts.compute}}
    if spec.perimeter.organization_bound:
        conditions["StringEquals"]["aws:PrincipalOrgID"] = spec.organization_id
    tables = f"arn:aws:dynamodb:{spec.region}:{spec.accounts.compute}:table/parallelcluster-*"
    return document(statement("ParallelClusterStateTables", "Allow", DYNAMODB_TABLE_ACTIONS, [tables], "*", conditions))
