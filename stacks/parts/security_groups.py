"""Security groups of the compute VPC. No group has allow-all egress: every destination is listed."""

from __future__ import annotations

from typing import Any

from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from spec import DeploymentSpec

# Lustre: the client connects to TCP 988 from the reserved ports 1018-1023 (FSx for Lustre user guide).
LUSTRE_PORTS: tuple[ec2.Port, ...] = (ec2.Port.tcp(988), ec2.Port.tcp_range(1018, 1023))
MYSQL_PORT = ec2.Port.tcp(3306)
# CDK's rule for "no egress": ICMP type 252 code 86 to the broadcast address, which matches no traffic.
NO_TRAFFIC_PEER = ec2.Peer.ipv4("255.255.255.255/32")
NO_TRAFFIC_PORT = ec2.Port.icmp_type_and_code(252, 86)
NO_TRAFFIC_DESCRIPTION = "Disallow all traffic"


class TrainingSecurityGroups(Construct):
    """cluster: head and compute nodes; endpoints: interface endpoints; notebook: the SageMaker notebook.

    A managed FSx for Lustre file system gets ParallelCluster's own storage group (its id exists only
    once ParallelCluster's stack made it), which admits the cluster group; the cluster group may send
    Lustre traffic to the VPC's addresses, where that file system lives."""

    def __init__(self, scope: Construct, construct_id: str, spec: DeploymentSpec, vpc: ec2.IVpc) -> None:
        super().__init__(scope, construct_id)
        s3_prefix_list = ec2.Peer.prefix_list(spec.s3_prefix_list_id)
        self._self_rules: dict[str, set[str]] = {}  # group id -> directions with an all-traffic self rule

        def group(name: str, description: str) -> ec2.SecurityGroup:
            return ec2.SecurityGroup(
                self,
                name,
                vpc=vpc,
                description=f"{spec.name} {description}",
                allow_all_outbound=False,
                allow_all_ipv6_outbound=False,
            )

        self.cluster = group("Cluster", "head and compute nodes (EFA, SLURM, NFS among themselves)")
        self.endpoints = group("Endpoints", "interface VPC endpoints (HTTPS in, nothing out)")
        self.notebook = group("Notebook", "SageMaker notebook (VPC only)")
        # With cluster.accounting: the head node's own group (in addition to the cluster group) is the one
        # client of the accounting database, so compute nodes cannot reach MySQL.
        self.head_node: ec2.SecurityGroup | None = None
        self.database: ec2.SecurityGroup | None = None
        if spec.cluster is not None and spec.cluster.accounting.enabled:
            self.head_node = group("HeadNode", "head node only (the one client of the accounting database)")
            self.database = group("AccountingDatabase", "Slurm accounting database (MySQL from the head node only)")
            self.head_node.add_egress_rule(self.database, MYSQL_PORT, "slurmdbd to the accounting database")
            self.database.add_ingress_rule(self.head_node, MYSQL_PORT, "MySQL from the head node's slurmdbd only")

        # EFA needs all traffic to and from the group itself; ParallelCluster's validator checks it.
        self.cluster.add_ingress_rule(self.cluster, ec2.Port.all_traffic(), "EFA, SLURM and NFS among cluster nodes")
        self.cluster.add_egress_rule(self.cluster, ec2.Port.all_traffic(), "EFA, SLURM and NFS among cluster nodes")
        self._self_rules[self.cluster.security_group_id] = {"ingress", "egress"}

        if spec.cluster is not None and spec.cluster.fsx is not None:
            lustre = ec2.Peer.ipv4(vpc.vpc_cidr_block)
            for port in LUSTRE_PORTS:
                self.cluster.add_egress_rule(lustre, port, "Lustre client to FSx for Lustre in the VPC")

        for client, who in ((self.cluster, "cluster nodes"), (self.notebook, "the notebook")):
            client.add_egress_rule(s3_prefix_list, ec2.Port.tcp(443), "HTTPS to S3 through the gateway endpoint")
            client.add_egress_rule(self.endpoints, ec2.Port.tcp(443), "HTTPS to the interface endpoints")
            self.endpoints.add_ingress_rule(client, ec2.Port.tcp(443), f"HTTPS from {who}")

        if spec.cluster is not None:
            # ParallelCluster keeps cluster state in DynamoDB, reached through the gateway endpoint.
            self.cluster.add_egress_rule(
                ec2.Peer.prefix_list(spec.dynamodb_prefix_list_id),
                ec2.Port.tcp(443),
                "HTTPS to DynamoDB through the gateway endpoint (ParallelCluster state)",
            )

        if spec.network.internet_egress == "nat":
            # Chosen in the spec: package mirrors and registries through the NAT gateway.
            for number, why in ((443, "HTTPS"), (80, "HTTP package mirrors")):
                self.cluster.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(number), f"{why} through NAT (spec)")

        # EC2 gives every new group an allow-all egress rule, which CloudFormation removes only when the group's
        # own SecurityGroupEgress lists something. CDK writes rules to peer groups and prefix lists as separate
        # AWS::EC2::SecurityGroupEgress resources and drops its no-traffic placeholder once any rule is added, so a
        # group with only such rules (the notebook's, the head node's) kept the default. Listed last: an inline
        # rule that matches nothing (CDK's own placeholder), beside whatever else is inline.
        groups = (self.cluster, self.endpoints, self.notebook, self.head_node, self.database)
        for listed in (group for group in groups if group is not None):
            listed.add_egress_rule(NO_TRAFFIC_PEER, NO_TRAFFIC_PORT, NO_TRAFFIC_DESCRIPTION)

    def self_rule_descriptions(self) -> dict[str, dict[str, Any]]:
        """Group id -> its all-traffic self rules in EC2 DescribeSecurityGroups' shape, for
        spec.platform.validators.config_problems at synth (ids are tokens, compared as strings)."""
        out: dict[str, dict[str, Any]] = {}
        for group_id, directions in self._self_rules.items():
            rule = [{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": group_id}]}]
            out[group_id] = {
                "IpPermissions": rule if "ingress" in directions else [],
                "IpPermissionsEgress": rule if "egress" in directions else [],
            }
        return out
