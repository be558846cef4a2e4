"""What ParallelCluster would grant its own node roles, from its own builders. Runs under .pcluster-venv's Python.

stdin: JSON {"cluster_name", "account", "region", "vpc_id", "config": {...}, "images": {queue: ami-id}}.
`config` is the ClusterConfiguration the repo synthesizes, intrinsics replaced by concrete ids. Its
`Iam` sections are dropped here, so ParallelCluster builds the roles it would make for a cluster that
brings none: HeadNodeIamResources and ComputeNodeIamResources (pcluster/templates/cdk_builder_utils.py)
and the Slurm policies (pcluster/templates/slurm_builder.py) are constructed in a CDK v1 stack named
like ParallelCluster's cluster stack, and the stack is synthesized.

stdout: JSON {"version", "bucket", "artifact_directory", "roles": {"head" | "compute:<queue>":
{"managed_policy_arns": [...], "statements": [...]}}} with every intrinsic resolved to concrete values.

Nothing calls AWS: the three config properties that would (the queues' AMIs, the compute subnets, the ARNs of the
capacity reservations they name) are answered from the request, the capacity reservations an ODCR or Capacity Block queue names are answered with none
and any other call is refused (offline.py: loading such a config prefetches them), and the cluster bucket is
ParallelCluster's own name for the account and region with an artifact directory of its own shape.
"""

import json
import os
import sys
from typing import Any

os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("AWS_ACCESS_KEY_ID", "offline-contract")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "offline-contract")

import offline  # type: ignore[import-not-found]  # this folder's offline.py (sys.path[0] when run as a script)
from aws_cdk import aws_iam as iam  # CDK v1, ParallelCluster's pin
from aws_cdk import core
from pcluster.config.common import SharedStorageType
from pcluster.models.s3_bucket import S3Bucket
from pcluster.schemas.cluster_schema import ClusterSchema
from pcluster.templates.cdk_builder_utils import ComputeNodeIamResources, HeadNodeIamResources
from pcluster.templates.slurm_builder import SlurmConstruct
from pcluster.utils import get_installed_version

# A fixed stand-in for the random suffix ParallelCluster gives the cluster's artifact directory.
ARTIFACT_SUFFIX = "0123456789abcdef"
HOSTED_ZONE_ID = "Z0123456789EXAMPLE"
STACK_UUID = "00000000-0000-0000-0000-000000000000"


class ClusterBucket:
    """What the builders read from pcluster.models.s3_bucket.S3Bucket (name, artifact directory)."""

    def __init__(self, name: str, artifact_directory: str) -> None:
        self.name = name
        self.artifact_directory = artifact_directory

    def get_object_key(self, object_type: Any, object_name: str) -> str:
        return "/".join([self.artifact_directory, object_type.value, object_name])


def without_iam(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: without_iam(item) for key, item in value.items() if key != "Iam"}
    if isinstance(value, list):
        return [without_iam(item) for item in value]
    return value


def offline_config(request: dict[str, Any]) -> Any:
    config = ClusterSchema(cluster_name=request["cluster_name"]).load(without_iam(request["config"]))
    images = request["images"]
    subnets = sorted({s for q in request["config"]["Scheduling"]["SlurmQueues"] for s in q["Networking"]["SubnetIds"]})
    account, region = request["account"], request["region"]
    answers = {
        "image_dict": property(lambda self: dict(images)),
        # What DescribeCapacityReservations would give each reservation the queues name: its ARN in the compute
        # account (the head node's RunInstances grant on an ODCR or Capacity Block names it)
        "capacity_reservation_arns": property(
            lambda self: [
                f"arn:aws:ec2:{region}:{account}:capacity-reservation/{reservation}"
                for reservation in sorted(self.capacity_reservation_ids)
            ]
        ),
        "compute_subnet_ids": property(lambda self: list(subnets)),
        "vpc_id": property(lambda self: request["vpc_id"]),
    }
    config.__class__ = type("Offline" + type(config).__name__, (type(config),), answers)
    return config


class Resolver:
    def __init__(self, request: dict[str, Any], resources: dict[str, Any]) -> None:
        self.request = request
        self.resources = resources
        stack = request["cluster_name"]
        self.pseudo = {
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::Region": request["region"],
            "AWS::AccountId": request["account"],
            "AWS::StackName": stack,
            "AWS::StackId": f"arn:aws:cloudformation:{request['region']}:{request['account']}:stack/{stack}/{STACK_UUID}",
        }

    def ref(self, name: str) -> Any:
        if name in self.pseudo:
            return self.pseudo[name]
        kind = self.resources.get(name, {}).get("Type")
        if kind == "AWS::Route53::HostedZone":
            return HOSTED_ZONE_ID
        # Roles and other resources by logical id; the caller maps roles to the repo's own.
        return name

    def __call__(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self(item) for item in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, argument),) = value.items()
            if key == "Ref":
                return self.ref(argument)
            if key == "Fn::Join":
                separator, parts = argument
                return separator.join(str(self(part)) for part in parts)
            if key == "Fn::GetAtt":
                logical_id, attribute = argument
                return f"{logical_id}.{attribute}"
        return {key: self(item) for key, item in value.items()}


def main() -> None:
    offline.refuse_aws_calls()
    request = json.load(sys.stdin)
    name, account, region = request["cluster_name"], request["account"], request["region"]
    config = offline_config(request)
    bucket = ClusterBucket(
        S3Bucket.get_bucket_name(account, region),
        "/".join(["parallelcluster", get_installed_version(), "clusters", f"{name}-{ARTIFACT_SUFFIX}"]),
    )
    storage: dict[Any, list[Any]] = {storage_type: [] for storage_type in SharedStorageType}

    # aws_cdk.core is CDK v1's (.pcluster-venv); the type checker sees .venv's CDK v2, which has no such module.
    app = core.App()  # type: ignore[attr-defined]
    # ParallelCluster names its cluster stack after the cluster: table names, tags and ARNs follow it.
    stack = core.Stack(app, name, stack_name=name, env=core.Environment(account=account, region=region))  # type: ignore[attr-defined]
    head = HeadNodeIamResources(stack, "HeadNodeIamResources", config, config.head_node, storage, "HeadNode", bucket)
    compute_roles = {}
    for queue in config.scheduling.queues:
        built = ComputeNodeIamResources(
            stack, f"ComputeNodeIamResources{queue.name}", config, queue, storage, queue.name
        )
        compute_roles[queue.name] = built.instance_role
    # With managed DNS the Slurm part also wires a cleanup Lambda for the hosted zone; its role (a stand-in
    # here, as ParallelCluster's cluster stack would pass its own) is not a node role and is not reported.
    cleanup_role = iam.CfnRole(stack, "CleanupLambdaRole", assume_role_policy_document={})
    slurm = SlurmConstruct(
        scope=stack,
        id="Slurm",
        stack_name=name,
        cluster_config=config,
        bucket=bucket,
        managed_head_node_instance_role=head.instance_role,
        cleanup_lambda_role=cleanup_role,
        cleanup_lambda=None,
    )
    slurm.register_policies_with_role(stack, compute_roles)
    template = app.synth().get_stack_by_name(name).template

    resources = template["Resources"]
    resolve = Resolver(request, resources)
    role_keys = {head.instance_role.logical_id: "head"}
    role_keys.update({stack.resolve(role.logical_id): f"compute:{queue}" for queue, role in compute_roles.items()})
    role_keys = {stack.resolve(key): value for key, value in role_keys.items()}
    out: dict[str, dict[str, list[Any]]] = {
        key: {"managed_policy_arns": [], "statements": []} for key in role_keys.values()
    }
    for logical_id, resource in resources.items():
        properties = resource.get("Properties", {})
        if resource["Type"] == "AWS::IAM::Role" and logical_id in role_keys:
            out[role_keys[logical_id]]["managed_policy_arns"] = sorted(resolve(properties.get("ManagedPolicyArns", [])))
        if resource["Type"] != "AWS::IAM::Policy":
            continue
        for role in properties["Roles"]:
            role_id = role["Ref"]
            if role_id not in role_keys:
                continue
            for statement in properties["PolicyDocument"]["Statement"]:
                out[role_keys[role_id]]["statements"].append({**resolve(statement), "Policy": properties["PolicyName"]})
    json.dump(
        {
            "version": get_installed_version(),
            "bucket": bucket.name,
            "artifact_directory": bucket.artifact_directory,
            "stack_id": resolve.pseudo["AWS::StackId"],
            "roles": out,
        },
        sys.stdout,
        indent=1,
        sort_keys=True,
    )
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
