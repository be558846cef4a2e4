"""The aps-workspaces interface endpoint: remote write (and, with Grafana in the VPC, queries) stay in the VPC."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from policies.observability import ENDPOINT_SERVICE, prometheus_endpoint_policy
from spec import DeploymentSpec


class PrometheusEndpoint(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        spec: DeploymentSpec,
        vpc: ec2.IVpc,
        subnets: list[ec2.ISubnet],
        endpoint_security_group: ec2.ISecurityGroup,
        workspace_arn: str,
    ) -> None:
        super().__init__(scope, construct_id)
        self.endpoint = ec2.InterfaceVpcEndpoint(
            self,
            "Endpoint",
            vpc=vpc,
            service=ec2.InterfaceVpcEndpointService(f"com.amazonaws.{spec.region}.{ENDPOINT_SERVICE}", 443),
            subnets=ec2.SubnetSelection(subnets=subnets),
            # The endpoints' group admits HTTPS from the cluster group (and Grafana's), nothing else.
            security_groups=[endpoint_security_group],
            private_dns_enabled=True,
            open=False,
        )
        # Exactly policies.prometheus_endpoint_policy, as the property (rule packs read it there).
        cfn = self.endpoint.node.default_child
        cfn.policy_document = prometheus_endpoint_policy(spec, workspace_arn)  # type: ignore[union-attr]
