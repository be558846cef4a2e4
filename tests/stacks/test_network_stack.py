"""The compute VPC's template: endpoints and their policy, security groups, no internet by default."""

from __future__ import annotations

import json
from pathlib import Path

from policies import gateway_endpoint_policy
from policies.interface_endpoints import interface_endpoint_policy
from tests.stacks.conftest import Assembly


def _endpoints(assembly: Assembly) -> dict[str, dict]:
    return {
        e["Properties"]["ServiceName"] if isinstance(e["Properties"]["ServiceName"], str) else repr(e): e["Properties"]
        for e in assembly.resources("network", "AWS::EC2::VPCEndpoint").values()
    }


def test_s3_gateway_endpoint_policy_names_access_points_and_bucket_with_org(default_assembly: Assembly) -> None:
    spec = default_assembly.spec
    s3 = _endpoints(default_assembly)["com.amazonaws.us-east-1.s3"]
    assert s3["VpcEndpointType"] == "Gateway"
    policy = s3["PolicyDocument"]
    assert policy == gateway_endpoint_policy(spec)
    datasets = next(s for s in policy["Statement"] if s["Sid"] == "DatasetsThroughAccessPoints")
    for dataset in spec.data.datasets:
        assert spec.access_point_arn(dataset) in datasets["Resource"]
    assert spec.bucket_arn in datasets["Resource"]
    assert datasets["Condition"] == {"StringEquals": {"aws:PrincipalOrgID": spec.organization_id}}
    for statement in policy["Statement"]:
        assert statement["Principal"] == "*"
        resources = [statement["Resource"]] if isinstance(statement["Resource"], str) else statement["Resource"]
        assert "*" not in resources


def test_dynamodb_gateway_reaches_only_parallelclusters_tables(default_assembly: Assembly) -> None:
    from policies import dynamodb_endpoint_policy

    dynamodb = _endpoints(default_assembly)["com.amazonaws.us-east-1.dynamodb"]
    assert dynamodb["PolicyDocument"] == dynamodb_endpoint_policy(default_assembly.spec)
    (statement,) = dynamodb["PolicyDocument"]["Statement"]
    assert statement["Resource"] == "arn:aws:dynamodb:us-east-1:111111111111:table/parallelcluster-*"
    assert not any(action.endswith("*") for action in statement["Action"])


def test_interface_endpoints_cover_what_nodes_need_without_internet(default_assembly: Assembly) -> None:
    names = set(_endpoints(default_assembly))
    for service in ("ssm", "ssmmessages", "ec2messages", "logs", "sts", "kms", "ecr.api", "ecr.dkr", "cloudformation"):
        assert f"com.amazonaws.us-east-1.{service}" in names, service
    assert "com.amazonaws.us-east-1.sagemaker.api" in names
    assert "aws.sagemaker.us-east-1.notebook" in names
    for name, props in _endpoints(default_assembly).items():
        if props.get("VpcEndpointType") == "Interface":
            assert props["PrivateDnsEnabled"] is True
            # Each has exactly its builder's policy, or none where the service takes none.
            service = name.split(".us-east-1.")[-1]
            assert props.get("PolicyDocument") == interface_endpoint_policy(default_assembly.spec, service), service


def test_no_internet_path_by_default(default_assembly: Assembly) -> None:
    types = {r["Type"] for r in default_assembly.templates["network"]["Resources"].values()}
    assert "AWS::EC2::InternetGateway" not in types
    assert "AWS::EC2::NatGateway" not in types
    assert "AWS::EC2::FlowLog" in types


def test_security_group_egress_goes_only_to_listed_destinations(default_assembly: Assembly) -> None:
    spec = default_assembly.spec
    resources = default_assembly.templates["network"]["Resources"]
    groups = {k for k, v in resources.items() if v["Type"] == "AWS::EC2::SecurityGroup"}
    egress_rules = [v["Properties"] for v in resources.values() if v["Type"] == "AWS::EC2::SecurityGroupEgress"]
    for group in groups:
        egress_rules += resources[group]["Properties"].get("SecurityGroupEgress", [])
    assert egress_rules
    for rule in egress_rules:
        if "DestinationPrefixListId" in rule:
            assert rule["DestinationPrefixListId"] in {spec.s3_prefix_list_id, spec.dynamodb_prefix_list_id}
            assert (rule["FromPort"], rule["ToPort"], rule["IpProtocol"]) == (443, 443, "tcp")
        elif "DestinationSecurityGroupId" in rule:
            target = rule["DestinationSecurityGroupId"]["Fn::GetAtt"][0]
            assert target in groups
        elif rule.get("CidrIp") == {"Fn::GetAtt": ["NetworkVpc7FB7348F", "CidrBlock"]}:
            # Lustre to the managed FSx file system, whose group ParallelCluster makes (no id at synth).
            assert (rule["FromPort"], rule["ToPort"], rule["IpProtocol"]) in {(988, 988, "tcp"), (1018, 1023, "tcp")}
        else:
            # CDK's placeholder for "no egress at all" is the only CIDR rule when there is no NAT.
            assert rule["CidrIp"] == "255.255.255.255/32" and rule["IpProtocol"] == "icmp", rule


def test_cluster_group_has_efa_self_rule_and_lustre_ports(default_assembly: Assembly) -> None:
    resources = default_assembly.templates["network"]["Resources"]
    ingress = [v["Properties"] for v in resources.values() if v["Type"] == "AWS::EC2::SecurityGroupIngress"]
    self_rules = [
        r
        for r in ingress
        if r["IpProtocol"] == "-1" and r["SourceSecurityGroupId"]["Fn::GetAtt"][0] == r["GroupId"]["Fn::GetAtt"][0]
    ]
    assert self_rules, "EFA needs all traffic from the group itself"
    # Lustre: the cluster group sends to the file system in the VPC; ParallelCluster's storage group admits it.
    assert not [r for r in ingress if r["IpProtocol"] == "tcp" and r.get("FromPort") != 443]
    groups = [v["Properties"] for v in resources.values() if v["Type"] == "AWS::EC2::SecurityGroup"]
    lustre = {
        (r["FromPort"], r["ToPort"])
        for g in groups
        for r in g.get("SecurityGroupEgress", [])
        if r.get("CidrIp") == {"Fn::GetAtt": ["NetworkVpc7FB7348F", "CidrBlock"]}
    }
    assert lustre == {(988, 988), (1018, 1023)}


_FAKE_ID_PREFIX = {"AWS::EC2::VPC": "vpc", "AWS::EC2::VPCEndpoint": "vpce", "AWS::EC2::Subnet": "subnet"}


def _deployed_outputs(template: dict) -> tuple[dict[str, str], dict[str, str]]:
    """What a deploy of this template would put into `--outputs-file`: each output a made-up id of the resource it
    references (Ref or GetAtt), by the resource's type; also logical id -> that id."""
    outputs, ids = {}, {}
    for index, (name, output) in enumerate(sorted(template["Outputs"].items()), 1):
        value = output["Value"]
        logical = value["Ref"] if "Ref" in value else value["Fn::GetAtt"][0]
        prefix = _FAKE_ID_PREFIX.get(template["Resources"][logical]["Type"], "sg")
        outputs[name] = ids[logical] = f"{prefix}-{index:017x}"
    return outputs, ids


def test_phase_two_reads_the_outputs_the_network_stack_really_emits(default_assembly: Assembly, tmp_path: Path) -> None:
    """The synthesized template's output names, with deployed-looking values, go through llm-phase-two: each
    field gets the id of the right resource (the VPC, the S3 gateway endpoint, the sagemaker.api endpoint)."""
    from spec import DEFAULT_SPEC_PATH, load_spec
    from spec.phase_two import NETWORK_OUTPUTS, main

    template = default_assembly.templates["network"]
    assert set(NETWORK_OUTPUTS) <= set(template["Outputs"])
    outputs, ids = _deployed_outputs(template)
    outputs_file = tmp_path / "outputs.json"
    outputs_file.write_text(json.dumps({default_assembly.spec.stack_names["network"]: outputs}))
    spec_path = tmp_path / "my-deployment.yaml"
    spec_path.write_text(DEFAULT_SPEC_PATH.read_text())
    assert main([str(spec_path), "--outputs-file", str(outputs_file)]) == 0

    def endpoint(service: str) -> str:
        (logical,) = [
            k
            for k, r in template["Resources"].items()
            if r["Type"] == "AWS::EC2::VPCEndpoint"
            and r["Properties"]["ServiceName"] == f"com.amazonaws.us-east-1.{service}"
        ]
        return ids[logical]

    (vpc,) = [k for k, r in template["Resources"].items() if r["Type"] == "AWS::EC2::VPC"]
    network = load_spec(spec_path).network
    assert network.vpc_id == ids[vpc]
    assert network.s3_gateway_endpoint_id == endpoint("s3")
    assert network.sagemaker_api_endpoint_id == endpoint("sagemaker.api")


def test_synth_of_the_example_spec_warns_in_one_line(default_assembly: Assembly) -> None:
    warnings = [line for line in default_assembly.log.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1, default_assembly.log
    assert "example accounts (111111111111, 222222222222)" in warnings[0]
    assert "network.vpc_id" in warnings[0]
