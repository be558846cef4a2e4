"""VPC endpoints: S3 and DynamoDB gateways, and the interface endpoints that replace the internet."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from policies import dynamodb_endpoint_policy, gateway_endpoint_policy
from policies.interface_endpoints import interface_endpoint_policy, wanted_interface_endpoints
from spec import DeploymentSpec


def _service(name: str, region: str) -> ec2.IInterfaceVpcEndpointService:
    if name == "notebook":
        return ec2.InterfaceVpcEndpointService(f"aws.sagemaker.{region}.notebook", 443)
    return ec2.InterfaceVpcEndpointService(f"com.amazonaws.{region}.{name}", 443)


def private_interface_endpoint(
    scope: Construct,
    construct_id: str,
    spec: DeploymentSpec,
    service: str,
    vpc: ec2.IVpc,
    subnets: list[ec2.ISubnet],
    security_group: ec2.ISecurityGroup,
    policy: dict[str, object] | None,
) -> ec2.InterfaceVpcEndpoint:
    """An interface endpoint with private DNS in the endpoints' group, with `policy` (None: the service takes none)."""
    endpoint = ec2.InterfaceVpcEndpoint(
        scope,
        construct_id,
        vpc=vpc,
        service=_service(service, spec.region),
        subnets=ec2.SubnetSelection(subnets=subnets),
        security_groups=[security_group],
        private_dns_enabled=True,
        open=False,
    )
    if policy is not None:
        # Exactly the builder's policy, set as the property so that rule packs see it; the services in
        # policies.interface_endpoints.POLICYLESS take none.
        endpoint.node.default_child.policy_document = policy  # type: ignore[union-attr]
    return endpoint


class VpcEndpoints(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        spec: DeploymentSpec,
        vpc: ec2.IVpc,
        route_table_ids: list[str],
        subnets: list[ec2.ISubnet],
        endpoint_security_group: ec2.ISecurityGroup,
    ) -> None:
        super().__init__(scope, construct_id)

        def gateway(name: str, service: str, policy: dict[str, object]) -> ec2.CfnVPCEndpoint:
            return ec2.CfnVPCEndpoint(
                self,
                name,
                vpc_id=vpc.vpc_id,
                service_name=f"com.amazonaws.{spec.region}.{service}",
                vpc_endpoint_type="Gateway",
                route_table_ids=route_table_ids,
                policy_document=policy,
            )

        # Exactly policies.gateway_endpoint_policy(spec): the access points, the bucket, and the AWS-owned
        # buckets the nodes need, each listed with its reason.
        self.s3 = gateway("S3Gateway", "s3", gateway_endpoint_policy(spec))
        # ParallelCluster keeps its cluster state in DynamoDB; a gateway endpoint is free.
        self.dynamodb = gateway("DynamoDbGateway", "dynamodb", dynamodb_endpoint_policy(spec))
        self.interface_endpoints: dict[str, ec2.InterfaceVpcEndpoint] = {}
        for name in wanted_interface_endpoints(spec):
            construct_name = "".join(part.capitalize() for part in name.replace(".", "-").split("-"))
            self.interface_endpoints[name] = private_interface_endpoint(
                self,
                construct_name,
                spec,
                name,
                vpc,
                subnets,
                endpoint_security_group,
                interface_endpoint_policy(spec, name),
            )
