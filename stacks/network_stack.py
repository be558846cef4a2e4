"""Compute account: the VPC, its endpoints and its security groups."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from spec import DeploymentSpec
from spec.phase_two import S3_GATEWAY_ENDPOINT_OUTPUT, SAGEMAKER_API_ENDPOINT_OUTPUT, VPC_ID_OUTPUT
from stacks.parts.security_groups import TrainingSecurityGroups
from stacks.parts.training_vpc import TrainingVpc
from stacks.parts.vpc_endpoints import VpcEndpoints


class NetworkStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, spec: DeploymentSpec, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.network = TrainingVpc(self, "Network", spec)
        self.security_groups = TrainingSecurityGroups(self, "SecurityGroups", spec, self.network.vpc)
        self.endpoints = VpcEndpoints(
            self,
            "Endpoints",
            spec,
            self.network.vpc,
            self.network.route_table_ids,
            self.network.compute_subnets,
            self.security_groups.endpoints,
        )
        # Phase two of the deploy (spec.phase_two, llm-phase-two) copies this into network.vpc_id for the data account.
        CfnOutput(self, VPC_ID_OUTPUT, value=self.network.vpc.vpc_id)
        CfnOutput(self, "ComputeSubnetId", value=self.network.compute_subnets[0].subnet_id)
        CfnOutput(self, "ClusterSecurityGroupId", value=self.security_groups.cluster.security_group_id)
        # Phase two also copies these (network.s3_gateway_endpoint_id, network.sagemaker_api_endpoint_id).
        CfnOutput(self, S3_GATEWAY_ENDPOINT_OUTPUT, value=self.endpoints.s3.ref)
        if "sagemaker.api" in self.endpoints.interface_endpoints:
            sagemaker_api = self.endpoints.interface_endpoints["sagemaker.api"]
            CfnOutput(self, SAGEMAKER_API_ENDPOINT_OUTPUT, value=sagemaker_api.vpc_endpoint_id)
