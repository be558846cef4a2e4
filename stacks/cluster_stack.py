"""Compute account: the ParallelCluster cluster, its bootstrap assets and its node permissions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from cluster.config_builder import ClusterRefs, custom_resource_properties
from policies.cluster_nodes import compute_node_cluster_policy, head_node_cluster_policy, payload_parameter_name
from spec import DeploymentSpec, SpecError
from spec.platform.validators import config_problems
from stacks.nag.acknowledge import acknowledge, wildcard_resources
from stacks.network_stack import NetworkStack
from stacks.parts.accounting_database import AccountingDatabase
from stacks.parts.cluster_assets import ClusterAssets
from stacks.parts.parallel_cluster import ParallelCluster

BUILD_DIR = Path(__file__).resolve().parents[1] / "build" / "cluster"


class ClusterStack(Stack):
    def __init__(
        self, scope: Construct, construct_id: str, spec: DeploymentSpec, network: NetworkStack, **kwargs: Any
    ) -> None:
        super().__init__(scope, construct_id, termination_protection=spec.cluster.termination_protection, **kwargs)  # type: ignore[union-attr]
        assets = ClusterAssets(self, "Assets", spec, BUILD_DIR / spec.name)
        subnet = network.network.compute_subnets[0].subnet_id
        groups = network.security_groups
        self.accounting: AccountingDatabase | None = None
        if spec.cluster.accounting.enabled:  # type: ignore[union-attr]
            assert groups.database is not None and groups.head_node is not None
            self.accounting = AccountingDatabase(
                self, "Accounting", spec, network.network.vpc, network.network.database_subnets, groups.database
            )
        refs = ClusterRefs(
            head_subnet_id=subnet,
            compute_subnet_id=subnet,
            head_instance_role_arn=spec.role_arn("head-node"),
            compute_instance_role_arn=spec.role_arn("cluster-node"),
            head_bootstrap_uri=assets.uri("head_node.sh"),
            gpu_bootstrap_uri=assets.uri("gpu_node.sh"),
            trn1_bootstrap_uri=assets.uri("trn1_node.sh"),
            neuron_install_uri=assets.uri("neuron_install.sh"),
            nxdt_install_uri=assets.uri("nxdt_install.sh"),
            security_group_ids=(network.security_groups.cluster.security_group_id,),
            head_payload_uri=assets.payload.s3_object_url,
            head_payload_parameter=payload_parameter_name(spec),
            head_security_group_ids=(groups.head_node.security_group_id,) if groups.head_node else (),
            accounting_database_uri=self.accounting.uri if self.accounting else None,
            accounting_password_secret_arn=self.accounting.password.secret_arn if self.accounting else None,
        )
        properties = custom_resource_properties(spec, refs)
        # The rules ParallelCluster's validators apply to groups and subnets, checked on what this app builds.
        compute_subnet = network.network.compute_subnets[0]
        problems = config_problems(
            properties["ClusterConfiguration"],
            security_groups=network.security_groups.self_rule_descriptions(),
            subnet_azs={subnet: compute_subnet.availability_zone},
            reservation_azs={
                q.capacity.reservation_id: q.capacity.availability_zone or ""
                for q in spec.cluster.queues  # type: ignore[union-attr]
                if q.capacity.reservation_id is not None
            },
        )
        if problems:
            raise SpecError(problems)
        self.parallel_cluster = ParallelCluster(self, "ParallelCluster", spec, properties)
        policies = self._node_permissions(spec, assets)
        # ParallelCluster's nodes start calling AWS as soon as they boot: their permissions and the
        # payload's key must exist before the cluster does (IAM is eventually consistent; no race).
        for dependency in (*policies, assets.payload_parameter.node.default_child):
            self.parallel_cluster.cluster.node.add_dependency(dependency)
        if self.accounting is not None:
            # The head node configures slurmdbd at boot: the database and its password must exist first.
            self.parallel_cluster.cluster.node.add_dependency(self.accounting)
        CfnOutput(self, "HeadNodePrivateIp", value=self.parallel_cluster.head_node_private_ip)
        CfnOutput(self, "ValidationMessages", value=self.parallel_cluster.validation_messages)
        fsx = spec.cluster.fsx  # type: ignore[union-attr]
        if fsx is not None and fsx.file_system_id is None and fsx.deletion_policy == "Retain":
            CfnOutput(
                self,
                "FindRetainedFileSystem",
                description="A failed create rolls the cluster back but keeps a Retain file system (billed)",
                value=retained_file_system_command(spec),
            )

    def _node_permissions(self, spec: DeploymentSpec, assets: ClusterAssets) -> list[iam.CfnPolicy]:
        # Attached by role name: the roles live in the identity stack, and names keep the stacks free of exports.
        policies = []
        for role, document in (
            ("head-node", head_node_cluster_policy(spec, assets.object_arns)),
            *((role, compute_node_cluster_policy(spec, assets.object_arns)) for role in spec.compute_roles),
        ):
            policy = iam.CfnPolicy(
                self,
                f"ParallelClusterPermissions-{role}",
                policy_name="parallelcluster",
                roles=[spec.role_name(role)],
                policy_document=document,
            )
            acknowledge(
                policy,
                "IAM5",
                "EC2 Describe*, RunInstances and CreateFleet have no resource-level scoping that survives launch "
                "templates; every other wildcard is this cluster's own stack, tables, bucket prefix, log groups or "
                "instances (TerminateInstances is pinned by the parallelcluster:cluster-name tag).",
                applies_to=wildcard_resources(document),
            )
            policies.append(policy)
        return policies


def retained_file_system_command(spec: DeploymentSpec) -> str:
    """The AWS CLI line that lists this cluster's FSx file systems (ParallelCluster tags them with the
    cluster name); docs/cluster.md#troubleshooting says when and how to delete one."""
    return (
        f"aws fsx describe-file-systems --region {spec.region} --query "
        f"\"FileSystems[?Tags[?Key=='parallelcluster:cluster-name' && Value=='{spec.name}']].FileSystemId\""
    )
