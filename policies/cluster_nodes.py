"""What ParallelCluster's own node daemons need from AWS, scoped to this cluster.

The cluster runs with this repo's roles (`<name>-head-node`, `<name>-cluster-node`) so the data
account's access points can name them; ParallelCluster then adds no permissions of its own, and
these documents give the head node what it needs to run the SLURM scaling daemons (launch and
terminate this cluster's instances, its DynamoDB tables, its stack and its bucket) and the compute
nodes what they need to join. Dataset access stays in policies.identity.
"""

from __future__ import annotations

from policies.accounting import head_node_accounting_statements
from policies.documents import PolicyDocument, Statement, document, statement
from spec import DeploymentSpec

CLUSTER_TAG = "parallelcluster:cluster-name"
# ParallelCluster's own bucket for the account and region (pcluster.models.s3_bucket.S3Bucket.get_bucket_name).
CLUSTER_BUCKET = "parallelcluster-*-v1-do-not-delete"


def cluster_artifact_prefix(spec: DeploymentSpec) -> str:
    """Where ParallelCluster keeps this cluster's config and templates in its bucket:
    parallelcluster/<version>/clusters/<cluster name>-<random suffix>/ (models/cluster.py)."""
    return f"parallelcluster/*/clusters/{spec.name}-*"


def payload_parameter_name(spec: DeploymentSpec) -> str:
    """The SSM parameter holding the S3 URI of the head node's current payload (a stable key)."""
    return f"/{spec.name}/cluster/head-node-payload"


def _scope(spec: DeploymentSpec) -> dict[str, str]:
    cluster = spec.name  # cluster.config_builder.cluster_name: the ParallelCluster name (and its stack's)
    account, region = spec.accounts.compute, spec.region
    dynamodb = f"arn:aws:dynamodb:{region}:{account}:table"
    return {
        "cluster": cluster,
        "stack": f"arn:aws:cloudformation:{region}:{account}:stack/{cluster}/*",
        "status_table": f"{dynamodb}/parallelcluster-{cluster}",
        "slurm_table": f"{dynamodb}/parallelcluster-slurm-{cluster}",
        "logs": f"arn:aws:logs:{region}:{account}:log-group:/aws/parallelcluster/{cluster}-*",
        "bucket": f"arn:aws:s3:::{CLUSTER_BUCKET}",
        "artifacts": f"arn:aws:s3:::{CLUSTER_BUCKET}/{cluster_artifact_prefix(spec)}/*",
        "regional": f"arn:aws:s3:::{region}-aws-parallelcluster/*",
        "instances": f"arn:aws:ec2:{region}:{account}:instance/*",
        "volumes": f"arn:aws:ec2:{region}:{account}:volume/*",
        "payload_parameter": f"arn:aws:ssm:{region}:{account}:parameter{payload_parameter_name(spec)}",
    }


def _common(spec: DeploymentSpec, asset_object_arns: list[str]) -> list[Statement]:
    """What every node does: ParallelCluster's ComputeNodeIamResources, the Slurm table lookup, and
    the CloudWatch agent (CloudWatchAgentServerPolicy, less what cluster/verify/runtime_contract.py omits)."""
    scope = _scope(spec)
    return [
        # Describe calls have no resource-level permissions; DescribeVolumes/Tags serve the CloudWatch agent.
        statement(
            "DescribeInstancesAndVolumes",
            "Allow",
            [
                "ec2:DescribeInstances",
                "ec2:DescribeInstanceAttribute",
                "ec2:DescribeInstanceStatus",
                "ec2:DescribeVolumes",
                "ec2:DescribeTags",
            ],
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
            ["dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"],
            [scope["status_table"], scope["slurm_table"]],
        ),
        # A compute node finds its Slurm name through the table's InstanceId index at boot.
        statement(
            "FindSlurmNodeName",
            "Allow",
            ["dynamodb:Query"],
            [scope["slurm_table"], f"{scope['slurm_table']}/index/*"],
        ),
        # The head node reads its config by version (the cookbook's `s3api get-object --version-id`).
        statement(
            "ReadClusterArtifacts",
            "Allow",
            ["s3:GetObject", "s3:GetObjectVersion"],
            [scope["artifacts"], scope["regional"]],
        ),
        statement("LocateClusterBucket", "Allow", ["s3:GetBucketLocation"], [scope["bucket"]]),
        statement(
            "ListClusterArtifacts",
            "Allow",
            ["s3:ListBucket"],
            [scope["bucket"]],
            conditions={"StringLike": {"s3:prefix": [cluster_artifact_prefix(spec)]}},
        ),
        statement("BootstrapAssets", "Allow", ["s3:GetObject"], asset_object_arns),
        statement(
            "ClusterLogs",
            "Allow",
            ["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
            [scope["logs"], f"{scope['logs']}:*"],
        ),
        # PutMetricData has no resource-level permissions.
        statement("NodeMetrics", "Allow", ["cloudwatch:PutMetricData"], ["*"]),
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


def _managed_dns(spec: DeploymentSpec) -> list[Statement]:
    """With internet egress ParallelCluster keeps its private hosted zone (Route 53 has no VPC endpoint);
    the zone's id exists only once ParallelCluster's stack made it."""
    if spec.network.internet_egress == "none":
        return []
    return [
        statement(
            "RegisterNodesInClusterZone",
            "Allow",
            ["route53:ChangeResourceRecordSets"],
            ["arn:aws:route53:::hostedzone/*"],
        )
    ]


def head_node_cluster_policy(spec: DeploymentSpec, asset_object_arns: list[str]) -> PolicyDocument:
    scope = _scope(spec)
    own = {"StringEquals": {f"aws:ResourceTag/{CLUSTER_TAG}": scope["cluster"]}}
    return document(
        *_common(spec, asset_object_arns),
        *_managed_dns(spec),
        *head_node_accounting_statements(spec),
        statement(
            "DescribeCapacity",
            "Allow",
            [
                "ec2:DescribeInstanceTypes",
                "ec2:DescribeLaunchTemplates",
                "ec2:DescribeLaunchTemplateVersions",
                "ec2:DescribeCapacityReservations",
                "ec2:DescribeSubnets",
            ],
            ["*"],
        ),
        # The SLURM resume program launches compute nodes from the cluster's launch templates.
        statement("LaunchComputeNodes", "Allow", ["ec2:RunInstances", "ec2:CreateFleet"], ["*"]),
        statement(
            "TagLaunchedNodes",
            "Allow",
            ["ec2:CreateTags"],
            [scope["instances"], scope["volumes"]],
            conditions={"StringEquals": {"ec2:CreateAction": ["RunInstances", "CreateFleet"]}},
        ),
        # Tags on this cluster's own instances and volumes (ParallelCluster tags them at launch): never
        # on others, which could otherwise be tagged into the cluster and then terminated.
        statement("RetagOwnNodes", "Allow", ["ec2:CreateTags"], [scope["instances"], scope["volumes"]], conditions=own),
        statement("TerminateOwnNodesOnly", "Allow", ["ec2:TerminateInstances"], [scope["instances"]], conditions=own),
        statement(
            "ComputeConsoleOutput",
            "Allow",
            ["ec2:GetConsoleOutput"],
            [scope["instances"]],
            conditions={
                "StringEquals": {
                    f"aws:ResourceTag/{CLUSTER_TAG}": scope["cluster"],
                    "aws:ResourceTag/parallelcluster:node-type": "Compute",
                }
            },
        ),
        statement(
            "PassComputeRoleToEc2",
            "Allow",
            ["iam:PassRole"],
            [spec.role_arn(role) for role in spec.compute_roles],
            conditions={"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}},
        ),
        statement("SignalOwnClusterStack", "Allow", ["cloudformation:SignalResource"], [scope["stack"]]),
        statement("WriteSlurmNodeNames", "Allow", ["dynamodb:BatchWriteItem"], [scope["slurm_table"]]),
        # cluster/bootstrap/head_node.sh resolves the current payload through this stable key.
        statement("ReadPayloadPointer", "Allow", ["ssm:GetParameter"], [scope["payload_parameter"]]),
    )
