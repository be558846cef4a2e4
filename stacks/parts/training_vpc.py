"""The compute VPC: built here (private subnets in one AZ, optional NAT) or brought by a landing zone."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from spec import DeploymentSpec
from spec.model import database_availability_zones

# The accounting database's subnets: the last two /27s of the VPC range (the compute subnet and the NAT's
# public one are allocated from its start), one per AZ, routed nowhere but the VPC.
DATABASE_SUBNET_PREFIX = 27


class TrainingVpc(Construct):
    def __init__(self, scope: Construct, construct_id: str, spec: DeploymentSpec) -> None:
        super().__init__(scope, construct_id)
        net = spec.network
        if net.mode == "existing":
            assert net.existing is not None and net.vpc_id is not None  # the spec checks guarantee it
            # From attributes, never a lookup: synth stays offline and deterministic.
            self.vpc: ec2.IVpc = ec2.Vpc.from_vpc_attributes(
                self,
                "Vpc",
                vpc_id=net.vpc_id,
                vpc_cidr_block=str(net.existing.vpc_cidr),
                availability_zones=[net.availability_zone] * len(net.existing.subnet_ids),
                private_subnet_ids=net.existing.subnet_ids,
                # One route table per subnet, in the same order (spec.checks enforces the counts).
                private_subnet_route_table_ids=net.existing.route_table_ids,
            )
            self.cidr = str(net.existing.vpc_cidr)
            self.route_table_ids = list(net.existing.route_table_ids)
        else:
            with_nat = net.internet_egress == "nat"
            subnets = [
                ec2.SubnetConfiguration(
                    name="compute",
                    subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS if with_nat else ec2.SubnetType.PRIVATE_ISOLATED,
                    # p5 nodes take many addresses (32 network cards); leave room for hundreds of nodes.
                    cidr_mask=min(net.cidr.prefixlen + 2, 24),
                )
            ]
            if with_nat:
                subnets.append(ec2.SubnetConfiguration(name="egress", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=26))
            vpc = ec2.Vpc(
                self,
                "Vpc",
                ip_addresses=ec2.IpAddresses.cidr(str(net.cidr)),
                availability_zones=[net.availability_zone],
                subnet_configuration=subnets,
                nat_gateways=1 if with_nat else 0,
                enable_dns_hostnames=True,
                enable_dns_support=True,
            )
            self.vpc = vpc
            self.cidr = str(net.cidr)
            self.route_table_ids = [s.route_table.route_table_id for s in self.compute_subnets]
        self.database_subnets = self._database_subnets(spec)
        flow_log_group = logs.LogGroup(
            self,
            "FlowLogs",
            removal_policy=RemovalPolicy.RETAIN,
        )
        # The spec only admits values CloudWatch accepts.
        flow_log_group.node.default_child.add_property_override(  # type: ignore[union-attr]
            "RetentionInDays", net.flow_log_retention_days
        )
        ec2.FlowLog(
            self,
            "FlowLog",
            resource_type=ec2.FlowLogResourceType.from_vpc(self.vpc),
            destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_log_group),
            traffic_type=ec2.FlowLogTrafficType.ALL,
        )

    def _database_subnets(self, spec: DeploymentSpec) -> list[ec2.ISubnet]:
        """Two subnets in two AZs for the accounting database's subnet group (RDS needs two AZs)."""
        if spec.cluster is None or not spec.cluster.accounting.enabled:
            return []
        database = spec.cluster.accounting.database
        if spec.network.mode == "existing":
            assert database.subnet_ids is not None  # the spec checks guarantee it
            return [
                ec2.Subnet.from_subnet_id(self, f"DatabaseSubnet{i}", subnet_id)
                for i, subnet_id in enumerate(database.subnet_ids)
            ]
        ranges = list(spec.network.cidr.subnets(new_prefix=DATABASE_SUBNET_PREFIX))[-2:]
        subnets: list[ec2.ISubnet] = []
        for index, (zone, cidr) in enumerate(zip(database_availability_zones(spec), ranges, strict=True)):
            subnet = ec2.CfnSubnet(
                self,
                f"DatabaseSubnet{index}",
                vpc_id=self.vpc.vpc_id,
                availability_zone=zone,
                cidr_block=str(cidr),
                map_public_ip_on_launch=False,
                tags=[{"key": "Name", "value": f"{spec.name}-accounting-database-{zone}"}],
            )
            subnets.append(
                ec2.Subnet.from_subnet_attributes(
                    self, f"DatabaseSubnetRef{index}", subnet_id=subnet.attr_subnet_id, availability_zone=zone
                )
            )
        return subnets

    @property
    def compute_subnets(self) -> list[ec2.ISubnet]:
        selected = self.vpc.private_subnets or self.vpc.isolated_subnets
        return list(selected)
