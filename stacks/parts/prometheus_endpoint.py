"""The aps-workspaces interface endpoint: the head node's remote write stays in the VPC."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from policies.observability import ENDPOINT_SERVICE, prometheus_endpoint_policy
from spec import DeploymentSpec
from stacks.parts.vpc_endpoints import private_interface_endpoint


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
        # In the endpoints' group, which admits HTTPS from the cluster group only; the policy names the workspace.
        policy = prometheus_endpoint_policy(spec, workspace_arn)
        self.endpoint = private_interface_endpoint(
            self, "Endpoint", spec, ENDPOINT_SERVICE, vpc, subnets, endpoint_security_group, policy
        )
