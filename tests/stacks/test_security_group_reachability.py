"""Security-group reachability of the synthesized network: every port ParallelCluster needs between the head
node, the compute nodes, FSx for Lustre and the endpoints is open, and nothing more.

The head and compute nodes share the cluster group (ClusterConfiguration SecurityGroups). A managed FSx
for Lustre file system sits in ParallelCluster's own storage group, which admits the cluster group
(pcluster/templates/cluster_stack.py, _add_storage_security_group); its addresses are in the VPC."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.stacks.conftest import Assembly

pytestmark = pytest.mark.synth

ALL = ("-1", 0, 65535)


@dataclass(frozen=True)
class Rule:
    group: str  # logical id of the group the rule belongs to
    direction: str  # ingress | egress
    protocol: str
    from_port: int
    to_port: int
    peer: tuple[str, str]  # ("sg", logical id) | ("pl", prefix list) | ("cidr", cidr or "vpc")

    def covers(self, protocol: str, port: int) -> bool:
        return self.protocol == "-1" or (self.protocol == protocol and self.from_port <= port <= self.to_port)


def _group(value: Any) -> str:
    return value["Fn::GetAtt"][0] if isinstance(value, dict) else str(value)


def _peer(props: dict[str, Any]) -> tuple[str, str]:
    for key in ("SourceSecurityGroupId", "DestinationSecurityGroupId"):
        if key in props:
            return ("sg", _group(props[key]))
    for key in ("SourcePrefixListId", "DestinationPrefixListId"):
        if key in props:
            return ("pl", props[key])
    cidr = props.get("CidrIp")
    return ("cidr", "vpc" if isinstance(cidr, dict) and "CidrBlock" in str(cidr) else str(cidr))


def _rule(group: str, direction: str, props: dict[str, Any]) -> Rule:
    protocol = str(props["IpProtocol"])
    if protocol == "-1":
        return Rule(group, direction, "-1", 0, 65535, _peer(props))
    return Rule(group, direction, protocol, int(props["FromPort"]), int(props["ToPort"]), _peer(props))


def rules(template: dict[str, Any]) -> tuple[dict[str, str], list[Rule]]:
    groups: dict[str, str] = {}
    found: list[Rule] = []
    for logical, resource in template["Resources"].items():
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::EC2::SecurityGroup":
            groups[logical] = props["GroupDescription"]
            for direction, key in (("ingress", "SecurityGroupIngress"), ("egress", "SecurityGroupEgress")):
                for entry in props.get(key, []):
                    if entry.get("Description") != "Disallow all traffic":  # CDK's placeholder for no egress
                        found.append(_rule(logical, direction, entry))
        elif resource["Type"] in ("AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress"):
            direction = "ingress" if resource["Type"].endswith("Ingress") else "egress"
            found.append(_rule(_group(props["GroupId"]), direction, props))
    return groups, found


def _named(groups: dict[str, str], word: str) -> str:
    (logical,) = [k for k, description in groups.items() if word in description]
    return logical


def reachable(found: list[Rule], source: str, target: tuple[str, str], protocol: str, port: int) -> bool:
    """Egress from `source` to `target` and, where the target is one of ours, ingress there from `source`."""
    out = any(
        r.group == source and r.direction == "egress" and r.peer == target and r.covers(protocol, port) for r in found
    )
    if target[0] != "sg":
        return out
    back = any(
        r.group == target[1] and r.direction == "ingress" and r.peer == ("sg", source) and r.covers(protocol, port)
        for r in found
    )
    return out and back


def test_every_port_parallelcluster_needs_is_reachable(default_assembly: Assembly) -> None:
    spec = default_assembly.spec
    groups, found = rules(default_assembly.templates["network"])
    cluster, endpoints = _named(groups, "head and compute"), _named(groups, "interface VPC endpoints")
    # Head <-> compute and compute <-> compute: Slurm, NFS from the head node, EFA (all traffic, itself).
    for port in (6817, 6818, 2049, 22, 60001):
        assert reachable(found, cluster, ("sg", cluster), "tcp", port), port
    assert reachable(found, cluster, ("sg", cluster), "-1", 0)
    # Lustre client to the managed file system's ENIs (ParallelCluster's storage group admits the cluster group).
    for port in (988, 1018, 1021, 1023):
        assert reachable(found, cluster, ("cidr", "vpc"), "tcp", port), port
    # AWS APIs: interface endpoints and the S3 / DynamoDB gateways (prefix lists).
    assert reachable(found, cluster, ("sg", endpoints), "tcp", 443)
    assert reachable(found, cluster, ("pl", spec.s3_prefix_list_id), "tcp", 443)
    assert reachable(found, cluster, ("pl", spec.dynamodb_prefix_list_id), "tcp", 443)


def test_the_cluster_group_opens_nothing_more(default_assembly: Assembly) -> None:
    spec = default_assembly.spec
    groups, found = rules(default_assembly.templates["network"])
    cluster, endpoints = _named(groups, "head and compute"), _named(groups, "interface VPC endpoints")
    expected = {
        ("ingress", *ALL, ("sg", cluster)),
        ("egress", *ALL, ("sg", cluster)),
        ("egress", "tcp", 988, 988, ("cidr", "vpc")),
        ("egress", "tcp", 1018, 1023, ("cidr", "vpc")),
        ("egress", "tcp", 443, 443, ("sg", endpoints)),
        ("egress", "tcp", 443, 443, ("pl", spec.s3_prefix_list_id)),
        ("egress", "tcp", 443, 443, ("pl", spec.dynamodb_prefix_list_id)),
    }
    actual = {(r.direction, r.protocol, r.from_port, r.to_port, r.peer) for r in found if r.group == cluster}
    assert actual == expected
    # Only the cluster and the notebook reach the endpoints, on HTTPS; the endpoints send nothing.
    into_endpoints = {(r.peer, r.protocol, r.from_port) for r in found if r.group == endpoints}
    assert into_endpoints == {(("sg", cluster), "tcp", 443), (("sg", _named(groups, "notebook")), "tcp", 443)}


def test_no_group_is_left_unused(default_assembly: Assembly) -> None:
    """ParallelCluster makes the managed file system's group itself; a group of ours for it would be unused."""
    groups, _ = rules(default_assembly.templates["network"])
    assert not [d for d in groups.values() if "FSx" in d or "Lustre" in d]
    assert len(groups) == 3  # cluster, endpoints, notebook


def test_the_head_nodes_agent_reaches_every_exporter_and_the_metrics_endpoint_only(default_assembly: Assembly) -> None:
    """Issue 17: the agent on the head node scrapes each node's exporters and the trainer's rank 0 (head and compute
    nodes share the cluster group), and remote-writes over HTTPS to the aps-workspaces endpoint in the endpoints'
    group. Nothing new is opened for it: the cluster group's exact rule set is the test above."""
    spec = default_assembly.spec
    assert spec.cluster is not None
    groups, found = rules(default_assembly.templates["network"])
    cluster, endpoints = _named(groups, "head and compute"), _named(groups, "interface VPC endpoints")
    for name, port in spec.cluster.observability.ports.model_dump().items():
        assert reachable(found, cluster, ("sg", cluster), "tcp", port), name
    assert reachable(found, cluster, ("sg", endpoints), "tcp", 443)
    # The metrics endpoint lives in the observability stack, in the endpoints' group, and brings no rule of its own.
    observability = default_assembly.templates["observability"]["Resources"]
    (endpoint,) = [r for r in observability.values() if r["Type"] == "AWS::EC2::VPCEndpoint"]
    (group,) = endpoint["Properties"]["SecurityGroupIds"]
    assert "SecurityGroupsEndpoints" in str(group)
    kinds = {r["Type"] for r in observability.values()}
    assert not kinds & {"AWS::EC2::SecurityGroup", "AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress"}


def test_every_group_lists_its_egress_so_cloudformation_drops_the_allow_all_default(default_assembly: Assembly) -> None:
    """EC2 gives a new group an allow-all egress rule; CloudFormation removes it only when the group's own
    SecurityGroupEgress property lists rules. AWS::EC2::SecurityGroupEgress resources add rules beside it. CDK put
    the notebook's only rules (prefix list, peer group) in such resources and dropped its no-traffic placeholder,
    so on AWS the notebook could send anything anywhere."""
    for stack, template in default_assembly.templates.items():
        for logical, resource in template["Resources"].items():
            if resource["Type"] == "AWS::EC2::SecurityGroup":
                assert resource["Properties"].get("SecurityGroupEgress"), f"{stack}: {logical} lists no egress"
