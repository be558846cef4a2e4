"""AWS ParallelCluster through its official CloudFormation custom resource.

The provider is ParallelCluster's own template (a nested stack, version from the spec); the cluster
is a `Custom::PclusterCluster` resource whose `DeletionPolicy` is a resource *property*. CDK's
RemovalPolicy must stay at its default: a retained custom resource never receives Delete, so
destroying the stack would leave the cluster (and its instances) running.

The provider's Lambda may pass only roles under `/parallelcluster/`; this repo's node roles sit at `/`
because the data account's policies name them by ARN. The provider's `AdditionalIamPolicies` parameter
gets a managed policy that lets it pass and read exactly those two roles.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnResource, Fn
from aws_cdk import aws_cloudformation as cloudformation
from aws_cdk import aws_iam as iam
from constructs import Construct

from policies.accounting import accounting_enabled, accounting_secret_arn
from policies.documents import PolicyDocument, document, statement
from spec import DeploymentSpec

PROVIDER_TEMPLATE = (
    "https://${AWS::Region}-aws-parallelcluster.s3.${AWS::Region}.${AWS::URLSuffix}"
    "/parallelcluster/%s/templates/custom_resource/cluster.yaml"
)


def provider_node_roles_policy(spec: DeploymentSpec) -> PolicyDocument:
    """What the provider Lambda needs on the repo's node roles: read them (ParallelCluster's role
    validators) and pass them to EC2 (the head node instance and the instance profiles)."""
    roles = [spec.role_arn(role) for role in ("head-node", *spec.compute_roles)]
    # ParallelCluster's PasswordSecretArnValidator describes the accounting secret (metadata only, no value).
    accounting = (
        [
            statement(
                "DescribeAccountingSecret", "Allow", ["secretsmanager:DescribeSecret"], [accounting_secret_arn(spec)]
            )
        ]
        if accounting_enabled(spec)
        else []
    )
    return document(
        statement(
            "PassNodeRolesToEc2",
            "Allow",
            ["iam:PassRole"],
            roles,
            conditions={"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}},
        ),
        statement("ReadNodeRoles", "Allow", ["iam:GetRole"], roles),
        *accounting,
    )


class ParallelCluster(Construct):
    def __init__(self, scope: Construct, construct_id: str, spec: DeploymentSpec, properties: dict[str, Any]) -> None:
        super().__init__(scope, construct_id)
        assert spec.cluster is not None
        self.provider_policy = iam.CfnManagedPolicy(
            self,
            "ProviderNodeRoles",
            managed_policy_name=f"{spec.name}-parallelcluster-provider-node-roles",
            description="ParallelCluster's provider Lambda may pass and read this deployment's node roles",
            policy_document=provider_node_roles_policy(spec),
        )
        self.provider = cloudformation.CfnStack(
            self,
            "Provider",
            template_url=Fn.sub(PROVIDER_TEMPLATE % spec.cluster.parallelcluster_version),
            parameters={"AdditionalIamPolicies": self.provider_policy.ref},
        )
        self.cluster = CfnResource(
            self,
            "Cluster",
            type="Custom::PclusterCluster",
            properties={"ServiceToken": self.provider.get_att("Outputs.ServiceToken").to_string(), **properties},
        )

    @property
    def head_node_private_ip(self) -> str:
        return self.cluster.get_att("headNode.privateIpAddress").to_string()

    @property
    def validation_messages(self) -> str:
        return self.cluster.get_att("validationMessages").to_string()
