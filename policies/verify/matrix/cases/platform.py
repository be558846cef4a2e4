"""Platform cases: what the nodes need through the gateway endpoint besides the datasets, and where that stops."""

from __future__ import annotations

import json

from policies.verify.harness.layers import (
    ENDPOINT,
)
from policies.verify.harness.model import (
    PolicySet,
    Principal,
    S3Request,
)
from policies.verify.matrix.model import OTHER_ORG_ACCOUNT, OTHER_ORG_ID, OUTSIDE_ACCOUNT, Case, implicit
from spec import DeploymentSpec


def endpoint_without_access_points(policies: PolicySet) -> PolicySet:
    """The endpoint policy with every access point ARN removed (the regression of the notes)."""
    document = json.loads(json.dumps(policies.documents["endpoint"]))
    for statement in document["Statement"]:
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        statement["Resource"] = [r for r in resources if ":accesspoint/" not in r] or ["arn:aws:s3:::none"]
    return policies.with_document("endpoint", document)


def platform_cases(spec: DeploymentSpec) -> list[Case]:
    """What the nodes need through the endpoint besides the datasets, and where that stops."""
    region, compute, org = spec.region, spec.accounts.compute, spec.organization_id
    node = Principal("cluster node (endpoint layer only)", spec.role_arn("cluster-node"), org)
    intruder = Principal("other organization's role", f"arn:aws:iam::{OTHER_ORG_ACCOUNT}:role/intruder", OTHER_ORG_ID)
    cluster_bucket = "parallelcluster-a1b2c3d4e5f6g7h8-v1-do-not-delete"
    squatted = "parallelcluster-squatted-v1-do-not-delete"
    # ParallelCluster's artifact directory of this cluster and of another one in the same bucket.
    cluster_config = f"parallelcluster/3.16.1/clusters/{spec.name}-0123456789abcdef/configs/cluster-config.yaml"
    other_config = "parallelcluster/3.16.1/clusters/other-0123456789abcdef/configs/cluster-config.yaml"
    assets_bucket = f"cdk-hnb659fds-assets-{compute}-{region}"

    def via_endpoint(who: Principal, action: str, bucket: str, account: str, key: str) -> S3Request:
        return S3Request(who, action, bucket, account, key=key, ours=False)

    return [
        Case(
            "node-reads-parallelcluster-bucket",
            "platform",
            "a node fetches ParallelCluster's cookbook from AWS's regional bucket",
            via_endpoint(
                node, "s3:GetObject", f"{region}-aws-parallelcluster", "000000000000", "archives/cookbook.tgz"
            ),
            {},
            why="the nodes boot without internet",
        ),
        Case(
            "node-writes-aws-owned-bucket",
            "platform",
            "a node writes into ParallelCluster's AWS-owned regional bucket",
            via_endpoint(node, "s3:PutObject", f"{region}-aws-parallelcluster", "000000000000", "loot.bin"),
            implicit(ENDPOINT),
            why="AWS-owned buckets are read-only from the VPC",
        ),
        Case(
            "head-node-signals-cloudformation",
            "platform",
            "the head node answers its CloudFormation wait condition",
            via_endpoint(node, "s3:PutObject", f"cloudformation-waitcondition-{region}", "000000000000", "signal/abc"),
            {},
            why="cfn-signal writes through a pre-signed URL",
        ),
        Case(
            "node-reads-cloudformation-bucket",
            "platform",
            "a node reads from CloudFormation's signal bucket",
            via_endpoint(node, "s3:GetObject", f"cloudformation-waitcondition-{region}", "000000000000", "signal/abc"),
            implicit(ENDPOINT),
            why="the signal buckets are write-only from the VPC",
        ),
        Case(
            "node-reads-cluster-bucket",
            "platform",
            "a node reads the cluster configuration from the cluster's ParallelCluster bucket",
            via_endpoint(node, "s3:GetObjectVersion", cluster_bucket, compute, cluster_config),
            {},
            why="the head node reads its config by version from this cluster's artifact directory",
        ),
        Case(
            "node-reads-other-cluster-artifacts",
            "platform",
            "a node reads another cluster's configuration from the shared ParallelCluster bucket",
            via_endpoint(node, "s3:GetObject", cluster_bucket, compute, other_config),
            implicit(ENDPOINT),
            why="only this cluster's artifact directory passes the endpoint",
        ),
        Case(
            "node-deletes-cluster-bucket",
            "platform",
            "a node deletes from the cluster's ParallelCluster bucket",
            via_endpoint(node, "s3:DeleteObject", cluster_bucket, compute, cluster_config),
            implicit(ENDPOINT),
            why="deployment buckets are cleaned up by the CLI, not from the nodes",
        ),
        Case(
            "node-writes-squatted-cluster-bucket",
            "platform",
            f"a node writes into a parallelcluster-* bucket owned by account {OUTSIDE_ACCOUNT}",
            via_endpoint(node, "s3:PutObject", squatted, OUTSIDE_ACCOUNT, "loot.bin"),
            implicit(ENDPOINT),
            why="nothing in the VPC writes to ParallelCluster's bucket, let alone to one named like it",
        ),
        Case(
            "node-reads-squatted-cluster-bucket",
            "platform",
            f"a node reads a planted config from a parallelcluster-* bucket owned by account {OUTSIDE_ACCOUNT}",
            via_endpoint(node, "s3:GetObject", squatted, OUTSIDE_ACCOUNT, cluster_config),
            implicit(ENDPOINT),
            why="a bucket name pattern is not an owner: aws:ResourceAccount pins it",
        ),
        Case(
            "node-reads-cdk-assets",
            "platform",
            "a node fetches its bootstrap script from the compute account's CDK asset bucket",
            via_endpoint(node, "s3:GetObject", assets_bucket, compute, "0123abcd.sh"),
            {},
            why="bootstrap scripts and the payload are CDK assets",
        ),
        Case(
            "node-writes-cdk-assets",
            "platform",
            "a node overwrites a bootstrap script in the CDK asset bucket",
            via_endpoint(node, "s3:PutObject", assets_bucket, compute, "0123abcd.sh"),
            implicit(ENDPOINT),
            why="assets are read-only from the VPC: a node cannot plant a script other nodes run",
        ),
        Case(
            "node-reads-squatted-cdk-assets",
            "platform",
            f"a node reads a bucket named like the asset bucket but owned by account {OUTSIDE_ACCOUNT}",
            via_endpoint(node, "s3:GetObject", assets_bucket, OUTSIDE_ACCOUNT, "0123abcd.sh"),
            implicit(ENDPOINT),
            why="a bucket name pattern is not an owner: aws:ResourceAccount pins it",
        ),
        Case(
            "outside-credentials-read-cdk-assets",
            "platform",
            "credentials of another organization read the asset bucket through the endpoint",
            via_endpoint(intruder, "s3:GetObject", assets_bucket, compute, "0123abcd.sh"),
            implicit(ENDPOINT) if spec.perimeter.organization_bound else {},
            why="the organization perimeter covers the deployment buckets too",
        ),
        Case(
            "outside-credentials-read-cluster-bucket",
            "platform",
            "credentials of another organization read the cluster's config through the endpoint",
            via_endpoint(intruder, "s3:GetObject", cluster_bucket, compute, cluster_config),
            implicit(ENDPOINT) if spec.perimeter.organization_bound else {},
            why="the organization perimeter covers the deployment buckets too",
        ),
    ]
