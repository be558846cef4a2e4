"""Security groups of the compute VPC. No group has allow-all egress: every destination is listed."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from spec import DeploymentSpec

LUSTRE_PORTS: tuple[ec2.Port, ...] = (ec2.Port.tcp(988), ec2.Port.tcp_range(1018, 1023))


class TrainingSecurityGroups(Construct):
    """cluster: head and compute nodes; fsx: the Lustre file system; endpoints: interface endpoints;
    notebook: the SageMaker notebook."""

    def __init__(self, scope: Construct, construct_id: str, spec: DeploymentSpec, vpc: ec2.IVpc) -> None:
        super().__init__(scope, construct_id)
        s3_prefix_list = ec2.Peer.prefix_list(spec.s3_prefix_list_id)

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
        self.fsx = group("Fsx", "FSx for Lustre file system")
        self.endpoints = group("Endpoints", "interface VPC endpoints (HTTPS in, nothing out)")
        self.notebook = group("Notebook", "SageMaker notebook (VPC only)")

        # EFA needs all traffic to and from the group itself; ParallelCluster's validator checks it.
        self.cluster.add_ingress_rule(self.cluster, ec2.Port.all_traffic(), "EFA, SLURM and NFS among cluster nodes")
        self.cluster.add_egress_rule(self.cluster, ec2.Port.all_traffic(), "EFA, SLURM and NFS among cluster nodes")
        for port in LUSTRE_PORTS:
            self.cluster.add_egress_rule(self.fsx, port, "Lustre client to FSx")
            self.fsx.add_ingress_rule(self.cluster, port, "Lustre clients on the cluster")
            self.fsx.add_ingress_rule(self.fsx, port, "Lustre servers among themselves")
            self.fsx.add_egress_rule(self.fsx, port, "Lustre servers among themselves")

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
            for port, why in ((443, "HTTPS"), (80, "HTTP package mirrors")):
                self.cluster.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(port), f"{why} through NAT (spec)")
