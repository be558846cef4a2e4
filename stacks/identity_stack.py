"""Compute account: the roles that the data account's policies name, and the operator role of SSM sessions."""

from __future__ import annotations

from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from policies.identity import key_resource_and_conditions
from spec import DeploymentSpec
from stacks.nag.acknowledge import acknowledge
from stacks.parts.dataset_role import DatasetRole
from stacks.parts.operator_role import OperatorRole

SSM_CORE = "AmazonSSMManagedInstanceCore"


class IdentityStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, spec: DeploymentSpec, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        ssm_core = iam.ManagedPolicy.from_aws_managed_policy_name(SSM_CORE)
        ec2_principal = iam.ServicePrincipal("ec2.amazonaws.com")
        self.roles: dict[str, DatasetRole] = {
            "cluster-node": DatasetRole(
                self,
                "ClusterNode",
                spec,
                "cluster-node",
                ec2_principal,
                "ParallelCluster compute nodes: dataset access through the access points",
                with_instance_profile=True,
                managed_policies=[ssm_core],
            ),
            "head-node": DatasetRole(
                self,
                "HeadNode",
                spec,
                "head-node",
                ec2_principal,
                "ParallelCluster head node: dataset access through the access points",
                with_instance_profile=True,
                managed_policies=[ssm_core],
            ),
        }
        for queue_role in spec.queue_roles:
            # A queue with allowed_groups: its nodes reach only the datasets naming this role (docs/security.md).
            self.roles[queue_role] = DatasetRole(
                self,
                "".join(part.capitalize() for part in queue_role.split("-")),
                spec,
                queue_role,
                ec2_principal,
                f"ParallelCluster compute nodes of queue {queue_role.removeprefix('queue-')}: its groups' datasets",
                with_instance_profile=True,
                managed_policies=[ssm_core],
            )
        if spec.notebook.enabled:
            self.roles["notebook"] = DatasetRole(
                self,
                "Notebook",
                spec,
                "notebook",
                iam.ServicePrincipal("sagemaker.amazonaws.com"),
                "SageMaker notebook: its datasets only, only through the access points",
                with_instance_profile=False,
            )
            self.roles["notebook"].role.add_to_policy(
                iam.PolicyStatement(
                    sid="NotebookLogs",
                    actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
                    resources=[
                        f"arn:aws:logs:{spec.region}:{spec.accounts.compute}:log-group:/aws/sagemaker/NotebookInstances:*"
                    ],
                )
            )
        # Only the role the spec names as its own operator role: roles of the user's are theirs to make.
        self.operator = OperatorRole(self, "Operator", spec) if spec.creates_operator_role else None
        self._acknowledge(spec)

    def _acknowledge(self, spec: DeploymentSpec) -> None:
        key_resource, _ = key_resource_and_conditions(spec)
        for name, dataset_role in self.roles.items():
            wildcards = [f"Resource::{key_resource}"] if "*" in key_resource else []
            for dataset in (*spec.datasets_readable_by(name), *spec.datasets_writable_by(name)):
                ap = spec.access_point_arn(dataset)
                wildcards.append(f"Resource::{ap}/object/{dataset.prefix}*")
                if dataset.output_prefix and name in dataset.writers:
                    wildcards.append(f"Resource::{ap}/object/{dataset.output_prefix}*")
            if name == "notebook":
                wildcards.append(
                    f"Resource::arn:aws:logs:{spec.region}:{spec.accounts.compute}:"
                    "log-group:/aws/sagemaker/NotebookInstances:*"
                )
            if wildcards:
                acknowledge(
                    dataset_role.role,
                    "IAM5",
                    "Object wildcards are the dataset prefixes of the spec (access point '/object/<prefix>*'); the "
                    "key wildcard is pinned to the dataset key by kms:ResourceAliases and kms:ViaService; the log "
                    "wildcard is the notebook's own log group.",
                    applies_to=sorted(set(wildcards)),
                )
            if name != "notebook":
                acknowledge(
                    dataset_role.role,
                    "IAM4",
                    "AmazonSSMManagedInstanceCore is the AWS-maintained minimum for Session Manager, the only way "
                    "into the nodes (no SSH, no bastion).",
                    applies_to=[f"Policy::arn:<AWS::Partition>:iam::aws:policy/{SSM_CORE}"],
                )
