"""What ParallelCluster's own node daemons need from AWS, scoped to this cluster.

The cluster runs with this repo's roles (`<name>-head-node`, `<name>-cluster-node`) so the data
account's access points can name them; ParallelCluster then adds no permissions of its own, and
these documents give the head node what it needs to run the SLURM scaling daemons (launch and
terminate this cluster's instances, its DynamoDB tables, its stack and its bucket) and the compute
nodes what they need to join. Dataset access stays in policies.identity.
"""

from __future__ import annotations

from policies.documents import PolicyDocument, Statement, document, statement
from policies.endpoint import wheelhouse_location
from spec import DeploymentSpec

CLUSTER_TAG = "parallelcluster:cluster-name"


def _scope(spec: DeploymentSpec) -> dict[str, str]:
    cluster = spec.name  # cluster.config_builder.cluster_name: the ParallelCluster name
    account, region = spec.accounts.compute, spec.region
    return {
        "cluster": cluster,
        "stack": f"arn:aws:cloudformation:{region}:{account}:stack/{cluster}/*",
        "tables": f"arn:aws:dynamodb:{region}:{account}:table/parallelcluster-*{cluster}",
        "logs": f"arn:aws:logs:{region}:{account}:log-group:/aws/parallelcluster/{cluster}-*",
        "bucket": "arn:aws:s3:::parallelcluster-*-v1-do-not-delete",
        "regional": f"arn:aws:s3:::{region}-aws-parallelcluster/*",
    }


def _common(spec: DeploymentSpec, asset_object_arns: list[str]) -> list[dict[str, object]]:
    scope = _scope(spec)
    return [
        # Describe calls have no resource-level permissions.
        statement(
            "DescribeInstancesAndStack",
            "Allow",
            ["ec2:DescribeInstances", "ec2:DescribeInstanceAttribute", "ec2:DescribeInstanceStatus"],
            ["*"],
        ),
        statement(
            "ReadOwnClusterStack",
            "Allow",
            ["cloudformation:DescribeStackResource", "cloudformation:DescribeStacks"],
            [scope["stack"]],
        ),
        statement(
            "ClusterStateTables",
            "Allow",
            ["dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:BatchGetItem"],
            [scope["tables"]],
        ),
        statement(
            "ClusterBucketAndRegionalArtifacts",
            "Allow",
            ["s3:GetObject"],
            [f"{scope['bucket']}/parallelcluster/*/clusters/{scope['cluster']}-*", scope["regional"]],
        ),
        statement("BootstrapAssets", "Allow", ["s3:GetObject"], asset_object_arns),
        statement(
            "ClusterLogs",
            "Allow",
            ["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
            [scope["logs"], f"{scope['logs']}:*"],
        ),
    ]


def container_pull_statements(spec: DeploymentSpec) -> list[Statement]:
    """GPU nodes pull the NeMo image (enroot import, or pyxis per job) from the spec's ECR repository only."""
    cluster = spec.cluster
    if cluster is None or not cluster.containers.pyxis:
        return []
    image = cluster.containers.ecr_image(spec.accounts.compute, spec.region)
    return [
        # GetAuthorizationToken has no resource-level permissions.
        statement("EcrAuthorization", "Allow", ["ecr:GetAuthorizationToken"], ["*"]),
        statement(
            "PullNemoImage",
            "Allow",
            ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
            [image.repository_arn],
        ),
    ]


def compute_node_cluster_policy(spec: DeploymentSpec, asset_object_arns: list[str]) -> PolicyDocument:
    return document(*_common(spec, asset_object_arns), *container_pull_statements(spec))


def head_node_cluster_policy(spec: DeploymentSpec, asset_object_arns: list[str]) -> PolicyDocument:
    scope = _scope(spec)
    account, region = spec.accounts.compute, spec.region
    own_instances = {"StringEquals": {f"aws:ResourceTag/{CLUSTER_TAG}": scope["cluster"]}}
    wheelhouse: list[Statement] = []
    location = wheelhouse_location(spec)
    if location is not None:
        bucket, prefix = location
        wheelhouse = [
            statement("ReadWheelhouse", "Allow", ["s3:GetObject"], [f"arn:aws:s3:::{bucket}/{prefix}*"]),
            statement(
                "ListWheelhouse",
                "Allow",
                ["s3:ListBucket"],
                [f"arn:aws:s3:::{bucket}"],
                conditions={"StringLike": {"s3:prefix": f"{prefix}*"}},
            ),
        ]
    return document(
        *_common(spec, asset_object_arns),
        *wheelhouse,
        statement(
            "DescribeCapacity",
            "Allow",
            [
                "ec2:DescribeInstanceTypes",
                "ec2:DescribeLaunchTemplates",
                "ec2:DescribeLaunchTemplateVersions",
                "ec2:DescribeCapacityReservations",
                "ec2:DescribeSubnets",
                "ec2:DescribeVolumes",
            ],
            ["*"],
        ),
        # The SLURM resume program launches compute nodes from the cluster's launch templates.
        statement("LaunchComputeNodes", "Allow", ["ec2:RunInstances", "ec2:CreateFleet"], ["*"]),
        statement(
            "TagLaunchedNodes",
            "Allow",
            ["ec2:CreateTags"],
            [f"arn:aws:ec2:{region}:{account}:instance/*", f"arn:aws:ec2:{region}:{account}:volume/*"],
            conditions={"StringEquals": {"ec2:CreateAction": ["RunInstances", "CreateFleet"]}},
        ),
        statement(
            "TerminateOwnNodesOnly",
            "Allow",
            ["ec2:TerminateInstances"],
            [f"arn:aws:ec2:{region}:{account}:instance/*"],
            conditions=own_instances,
        ),
        statement(
            "PassComputeRoleToEc2",
            "Allow",
            ["iam:PassRole"],
            [spec.role_arn("cluster-node")],
            conditions={"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}},
        ),
        statement("SignalOwnClusterStack", "Allow", ["cloudformation:SignalResource"], [scope["stack"]]),
        statement(
            "ClusterStateTablesWrite",
            "Allow",
            ["dynamodb:DeleteItem", "dynamodb:BatchWriteItem", "dynamodb:DescribeTable", "dynamodb:Scan"],
            [scope["tables"]],
        ),
        statement(
            "ClusterBucketWrite",
            "Allow",
            ["s3:PutObject", "s3:ListBucket"],
            [scope["bucket"], f"{scope['bucket']}/parallelcluster/*/clusters/{scope['cluster']}-*"],
        ),
    )
