"""AWS ParallelCluster through its official CloudFormation custom resource.

The provider is ParallelCluster's own template (a nested stack, version from the spec); the cluster
is a `Custom::PclusterCluster` resource whose `DeletionPolicy` is a resource *property*. CDK's
RemovalPolicy must stay at its default: a retained custom resource never receives Delete, so
destroying the stack would leave the cluster (and its instances) running.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnResource, Fn
from aws_cdk import aws_cloudformation as cloudformation
from constructs import Construct

from spec import DeploymentSpec

PROVIDER_TEMPLATE = (
    "https://${AWS::Region}-aws-parallelcluster.s3.${AWS::Region}.${AWS::URLSuffix}"
    "/parallelcluster/%s/templates/custom_resource/cluster.yaml"
)


class ParallelCluster(Construct):
    def __init__(self, scope: Construct, construct_id: str, spec: DeploymentSpec, properties: dict[str, Any]) -> None:
        super().__init__(scope, construct_id)
        assert spec.cluster is not None
        self.provider = cloudformation.CfnStack(
            self,
            "Provider",
            template_url=Fn.sub(PROVIDER_TEMPLATE % spec.cluster.parallelcluster_version),
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
