"""The DataPerimeter rule pack, cdk-nag style: one small stack with one resource per case, compliant and
non-compliant, validated by the pack itself."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from aws_cdk import App, Environment, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker

from policies import access_point_policy, bucket_policy, dynamodb_endpoint_policy, gateway_endpoint_policy, key_policy
from policies.interface_endpoints import interface_endpoint_policy
from spec import DEFAULT_SPEC_PATH, DeploymentSpec, load_spec, parse_spec
from stacks.assemble import add_nag_packs, assemble
from stacks.nag.data_perimeter import EC2_DEFAULT_EGRESS, PACK_NAME, DataPerimeterChecks, findings, rule_ids
from stacks.parts.security_groups import NO_TRAFFIC_PEER, NO_TRAFFIC_PORT
from tests.stacks.conftest import REPO, Assembly

SPEC = load_spec()
KEY_ARN = "arn:aws:kms:us-east-1:222222222222:key/0f0e0d0c-0b0a-0908-0706-050403020100"
Build = Callable[[Stack], Any]


def validate(build: Build, spec: DeploymentSpec | None = SPEC) -> dict[str, list[str]]:
    app = App()
    stack = Stack(app, "Test", env=Environment(account="111111111111", region="us-east-1"))
    build(stack)
    return findings(DataPerimeterChecks(app, spec), stack)


def assert_compliant(build: Build, rule: str, spec: DeploymentSpec | None = SPEC) -> None:
    found = validate(build, spec)
    assert f"{PACK_NAME}-{rule}" not in rule_ids(found), found


def assert_non_compliant(
    build: Build, rule: str, spec: DeploymentSpec | None = SPEC, finding: str | None = None
) -> None:
    found = validate(build, spec)
    rule_id = f"{PACK_NAME}-{rule}"
    assert rule_id in rule_ids(found), found
    if finding is not None:
        assert f"{rule_id}[{finding}]" in found, found


ALL_BLOCKED = s3.CfnAccessPoint.PublicAccessBlockConfigurationProperty(
    block_public_acls=True, block_public_policy=True, ignore_public_acls=True, restrict_public_buckets=True
)


def access_point(**overrides: Any) -> Build:
    props: dict[str, Any] = {
        "bucket": "datasets",
        "vpc_configuration": s3.CfnAccessPoint.VpcConfigurationProperty(vpc_id="vpc-0a1b2c3d4e5f67890"),
        "public_access_block_configuration": ALL_BLOCKED,
    }
    props.update(overrides)
    return lambda stack: s3.CfnAccessPoint(stack, "AccessPoint", **props)


# ---- AP1 / AP2 ------------------------------------------------------------------------------------


def test_ap1_vpc_origin() -> None:
    assert_compliant(access_point(), "AP1")
    assert_non_compliant(access_point(vpc_configuration=None), "AP1")


def test_ap2_block_public_access() -> None:
    assert_compliant(access_point(), "AP2")
    assert_non_compliant(access_point(public_access_block_configuration=None), "AP2")
    partial = s3.CfnAccessPoint.PublicAccessBlockConfigurationProperty(
        block_public_acls=True, block_public_policy=True, ignore_public_acls=True, restrict_public_buckets=False
    )
    assert_non_compliant(access_point(public_access_block_configuration=partial), "AP2")


# ---- RP1 ------------------------------------------------------------------------------------------

OPEN_READ = {
    "Sid": "OpenRead",
    "Effect": "Allow",
    "Principal": {"AWS": "*"},
    "Action": "s3:GetObject",
    "Resource": "arn:aws:s3:::datasets/*",
}


def _bucket_policy(*statements: dict[str, Any]) -> Build:
    document = {"Version": "2012-10-17", "Statement": list(statements)}
    return lambda stack: s3.CfnBucketPolicy(stack, "Policy", bucket="datasets", policy_document=document)


@pytest.mark.parametrize(
    "condition",
    [
        {"StringEquals": {"aws:PrincipalOrgID": "o-a1b2c3d4e5"}},
        {"StringEquals": {"s3:DataAccessPointAccount": "222222222222"}},
        {"ArnLike": {"aws:PrincipalArn": "arn:aws:iam::111111111111:role/reader"}},
    ],
    ids=["organization", "own-access-points", "role-arn"],
)
def test_rp1_wildcard_principal_scoped_by_a_caller_condition(condition: dict[str, Any]) -> None:
    assert_compliant(_bucket_policy({**OPEN_READ, "Condition": condition}), "RP1")


@pytest.mark.parametrize(
    "statement",
    [
        OPEN_READ,
        {**OPEN_READ, "Principal": "*"},
        {**OPEN_READ, "Condition": {"Bool": {"aws:SecureTransport": "true"}}},
        {**OPEN_READ, "Condition": {"StringNotEquals": {"aws:PrincipalOrgID": "o-a1b2c3d4e5"}}},
        {**OPEN_READ, "Condition": {"StringEqualsIfExists": {"aws:PrincipalOrgID": "o-a1b2c3d4e5"}}},
        {**OPEN_READ, "Condition": {"StringLike": {"aws:PrincipalArn": "*"}}},
    ],
    ids=["aws-star", "plain-star", "tls-only", "negative-operator", "if-exists", "star-value"],
)
def test_rp1_open_wildcard_principal_in_a_bucket_policy(statement: dict[str, Any]) -> None:
    assert_non_compliant(_bucket_policy(statement), "RP1", finding="OpenRead")


def test_rp1_deny_and_named_principals_are_fine() -> None:
    deny = {**OPEN_READ, "Sid": "DenyAll", "Effect": "Deny", "Action": "s3:*"}
    named = {**OPEN_READ, "Sid": "Named", "Principal": {"AWS": "arn:aws:iam::111111111111:root"}}
    assert_compliant(_bucket_policy(deny, named), "RP1")


def test_rp1_access_point_and_key_policies() -> None:
    open_ap = {"Version": "2012-10-17", "Statement": [{**OPEN_READ, "Resource": "*"}]}
    assert_non_compliant(access_point(policy=open_ap), "RP1", finding="OpenRead")
    assert_compliant(access_point(policy=access_point_policy(SPEC, SPEC.data.datasets[0])), "RP1")
    open_key = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": "*", "Action": "kms:*", "Resource": "*"}],
    }
    assert_non_compliant(lambda stack: kms.CfnKey(stack, "Key", key_policy=open_key), "RP1", finding="Statement1")
    assert_compliant(lambda stack: kms.CfnKey(stack, "Key", key_policy=key_policy(SPEC)), "RP1")


def test_rp1_our_bucket_policy_is_compliant() -> None:
    assert_compliant(_bucket_policy(*bucket_policy(SPEC, KEY_ARN)["Statement"]), "RP1")


# ---- VPCE1 / VPCE2 --------------------------------------------------------------------------------


def endpoint(policy: dict[str, Any] | None, service: str = "com.amazonaws.us-east-1.s3") -> Build:
    return lambda stack: ec2.CfnVPCEndpoint(
        stack, "Endpoint", vpc_id="vpc-0a1b2c3d4e5f67890", service_name=service, policy_document=policy
    )


OPEN_ENDPOINT: dict[str, Any] = {
    "Version": "2012-10-17",
    "Statement": [{"Sid": "Everything", "Effect": "Allow", "Principal": "*", "Action": "s3:*", "Resource": "*"}],
}


def test_vpce1_endpoint_policy_is_bounded() -> None:
    assert_compliant(endpoint(gateway_endpoint_policy(SPEC)), "VPCE1")
    assert_non_compliant(endpoint(None), "VPCE1")
    assert_non_compliant(endpoint(OPEN_ENDPOINT), "VPCE1", finding="Everything")
    scoped = {
        "Statement": [
            {**OPEN_ENDPOINT["Statement"][0], "Condition": {"StringEquals": {"aws:PrincipalOrgID": "o-a1b2c3d4e5"}}}
        ]
    }
    assert_compliant(endpoint(scoped), "VPCE1")


def interface_endpoint(policy: dict[str, Any] | None, service: str) -> Build:
    return lambda stack: ec2.CfnVPCEndpoint(
        stack,
        "Endpoint",
        vpc_id="vpc-0a1b2c3d4e5f67890",
        service_name=service,
        vpc_endpoint_type="Interface",
        policy_document=policy,
    )


@pytest.mark.parametrize("service", ["logs", "ecr.api", "sts", "cloudformation", "ec2", "ssm"])
def test_vpce1_covers_every_interface_endpoint(service: str) -> None:
    """Issue 14: interface endpoints kept the allow-all default and no rule noticed."""
    name = f"com.amazonaws.us-east-1.{service}"
    assert_non_compliant(interface_endpoint(None, name), "VPCE1")
    assert_non_compliant(interface_endpoint(OPEN_ENDPOINT, name), "VPCE1", finding="Everything")
    assert_compliant(interface_endpoint(interface_endpoint_policy(SPEC, service), name), "VPCE1")


def test_vpce1_accepts_no_policy_only_where_the_service_takes_none() -> None:
    assert_compliant(interface_endpoint(None, "com.amazonaws.us-east-1.ssmmessages"), "VPCE1")
    assert_compliant(interface_endpoint(None, "aws.sagemaker.us-east-1.notebook"), "VPCE1")
    assert_non_compliant(endpoint(None, service="com.amazonaws.us-east-1.dynamodb"), "VPCE1")
    assert_compliant(endpoint(dynamodb_endpoint_policy(SPEC), service="com.amazonaws.us-east-1.dynamodb"), "VPCE1")


def test_vpce2_applies_to_the_s3_gateway_only() -> None:
    found = validate(endpoint(None, service="com.amazonaws.us-east-1.dynamodb"))
    assert f"{PACK_NAME}-VPCE2" not in rule_ids(found)


def test_vpce2_endpoint_lists_the_access_points() -> None:
    assert_compliant(endpoint(gateway_endpoint_policy(SPEC)), "VPCE2")
    only_bucket = {
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": "*",
                "Action": "s3:GetObject",
                "Resource": [SPEC.bucket_arn, f"{SPEC.bucket_arn}/*"],
            }
        ]
    }
    missing = SPEC.access_point_arn(SPEC.data.datasets[0])
    assert_non_compliant(endpoint(only_bucket), "VPCE2", finding=missing)
    assert_non_compliant(endpoint(only_bucket), "VPCE2", spec=None)
    with_any_ap = {"Statement": [{**only_bucket["Statement"][0], "Resource": [missing]}]}
    assert_compliant(endpoint(with_any_ap), "VPCE2", spec=None)


# ---- EC1 ------------------------------------------------------------------------------------------


NO_TRAFFIC = (NO_TRAFFIC_PEER, NO_TRAFFIC_PORT)  # inline, so EC2's allow-all default goes


def security_group(*rules: tuple[ec2.IPeer, ec2.Port], allow_all: bool = False) -> Build:
    def build(stack: Stack) -> None:
        vpc = ec2.Vpc.from_vpc_attributes(
            stack,
            "Vpc",
            vpc_id="vpc-0a1b2c3d4e5f67890",
            vpc_cidr_block="10.40.0.0/16",
            availability_zones=["us-east-1a"],
        )
        group = ec2.SecurityGroup(stack, "Group", vpc=vpc, allow_all_outbound=allow_all)
        for peer, port in rules:
            group.add_egress_rule(peer, port)

    return build


def test_ec1_declared_destinations_are_compliant() -> None:
    assert_compliant(security_group(), "EC1")  # CDK's 255.255.255.255/32 placeholder: no egress at all
    s3 = (ec2.Peer.prefix_list(SPEC.s3_prefix_list_id), ec2.Port.tcp(443))
    assert_compliant(security_group(s3, NO_TRAFFIC), "EC1")
    assert_compliant(security_group((ec2.Peer.ipv4("10.40.8.0/24"), ec2.Port.tcp(988))), "EC1")

    def to_another_group(stack: Stack) -> None:
        other = ec2.SecurityGroup.from_security_group_id(stack, "Other", "sg-0123456789abcdef0")
        security_group((other, ec2.Port.tcp(443)), NO_TRAFFIC)(stack)

    assert_compliant(to_another_group, "EC1")


def test_ec1_a_group_whose_rules_are_all_separate_resources_keeps_ec2s_allow_all() -> None:
    """CDK writes prefix-list and peer-group rules as AWS::EC2::SecurityGroupEgress and drops its placeholder:
    the group lists no egress of its own, so EC2's default allow-all rule stays beside them."""
    s3 = (ec2.Peer.prefix_list(SPEC.s3_prefix_list_id), ec2.Port.tcp(443))
    assert_non_compliant(security_group(s3), "EC1", finding=EC2_DEFAULT_EGRESS)

    def to_another_group(stack: Stack) -> None:
        other = ec2.SecurityGroup.from_security_group_id(stack, "Other", "sg-0123456789abcdef0")
        security_group((other, ec2.Port.tcp(443)))(stack)

    assert_non_compliant(to_another_group, "EC1", finding=EC2_DEFAULT_EGRESS)


def test_ec1_undeclared_destinations_are_findings() -> None:
    assert_non_compliant(security_group(allow_all=True), "EC1", finding="0.0.0.0/0:-1:all")
    assert_non_compliant(
        security_group((ec2.Peer.any_ipv4(), ec2.Port.tcp(443))), "EC1", finding="0.0.0.0/0:tcp:443-443"
    )
    assert_non_compliant(
        security_group((ec2.Peer.prefix_list("pl-0123456789abcdef0"), ec2.Port.tcp(443))),
        "EC1",
        finding="pl-0123456789abcdef0:tcp:443-443",
    )
    assert_non_compliant(security_group((ec2.Peer.any_ipv6(), ec2.Port.tcp(443))), "EC1", finding="::/0:tcp:443-443")
    assert_non_compliant(security_group((ec2.Peer.ipv4("10.99.0.0/16"), ec2.Port.tcp(22))), "EC1")


def test_ec1_internet_https_only_where_the_spec_chose_nat() -> None:
    nat = SPEC.model_copy(update={"network": SPEC.network.model_copy(update={"internet_egress": "nat"})})
    https = security_group((ec2.Peer.any_ipv4(), ec2.Port.tcp(443)))
    assert_compliant(https, "EC1", spec=nat)
    assert_non_compliant(security_group((ec2.Peer.any_ipv4(), ec2.Port.tcp(22))), "EC1", spec=nat)
    assert_non_compliant(security_group(allow_all=True), "EC1", spec=nat)


# ---- SM1 / SM2 / SM3 ------------------------------------------------------------------------------


def notebook(**overrides: Any) -> Build:
    props: dict[str, Any] = {
        "instance_type": "ml.t3.medium",
        "role_arn": "arn:aws:iam::111111111111:role/llm-demo-notebook",
        "subnet_id": "subnet-0123456789abcdef0",
        "security_group_ids": ["sg-0123456789abcdef0"],
        "direct_internet_access": "Disabled",
        "root_access": "Disabled",
        "instance_metadata_service_configuration": sagemaker.CfnNotebookInstance.InstanceMetadataServiceConfigurationProperty(
            minimum_instance_metadata_service_version="2"
        ),
    }
    props.update(overrides)
    return lambda stack: sagemaker.CfnNotebookInstance(stack, "Notebook", **props)


@pytest.mark.parametrize(
    ("rule", "non_compliant"),
    [
        ("SM1", {"direct_internet_access": "Enabled"}),
        ("SM1", {"direct_internet_access": None}),  # CloudFormation's default is Enabled
        ("SM2", {"root_access": "Enabled"}),
        ("SM2", {"root_access": None}),
        ("SM3", {"instance_metadata_service_configuration": None}),
        (
            "SM3",
            {
                "instance_metadata_service_configuration": sagemaker.CfnNotebookInstance.InstanceMetadataServiceConfigurationProperty(
                    minimum_instance_metadata_service_version="1"
                )
            },
        ),
    ],
)
def test_notebook_rules(rule: str, non_compliant: dict[str, Any]) -> None:
    assert_compliant(notebook(), rule)
    assert_non_compliant(notebook(**non_compliant), rule)


# ---- the pack in the real synth -------------------------------------------------------------------


def test_the_deployment_complies(default_assembly: Assembly) -> None:
    """CDK lists a plugin in the report only when it found something (even if acknowledged)."""
    reports = {r["pluginName"]: r for r in default_assembly.validation_report["pluginReports"]}
    assert reports.get(PACK_NAME, {"violations": []})["violations"] == []


def test_the_registered_packs_make_a_finding_fail_synth(tmp_path: Path) -> None:
    """The plugins assemble() registers, on an app of one stray access point (not the whole deployment)."""
    context = json.loads((REPO / "cdk.json").read_text())["context"]
    app = App(outdir=str(tmp_path), context=context)
    data = Environment(account=SPEC.accounts.data, region=SPEC.region)
    s3.CfnAccessPoint(Stack(app, "Data", env=data), "Stray", bucket=SPEC.data.bucket_name)  # no VPC, no BPA
    add_nag_packs(app, SPEC)
    with pytest.raises(RuntimeError, match=r"Acknowledge with .DataPerimeter::DataPerimeter-AP1"):
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    violations = {
        v["ruleName"] for r in report["pluginReports"] if r["pluginName"] == PACK_NAME for v in r["violations"]
    }
    assert violations == {f"{PACK_NAME}-AP1", f"{PACK_NAME}-AP2"}


def test_assemble_registers_the_packs(monkeypatch: pytest.MonkeyPatch) -> None:
    registered: list[tuple[App, DeploymentSpec]] = []
    monkeypatch.setattr("stacks.assemble.add_nag_packs", lambda app, spec: registered.append((app, spec)))
    doc = yaml.safe_load(DEFAULT_SPEC_PATH.read_text())
    doc["notebook"]["enabled"] = False
    doc.pop("cluster", None)
    for dataset in doc["data"]["datasets"]:
        dataset["readers"] = [r for r in dataset["readers"] if r != "notebook"]
    spec = parse_spec(doc)
    context = json.loads((REPO / "cdk.json").read_text())["context"]
    app = App(context=context)
    assemble(app, spec)
    assert registered == [(app, spec)]
    assemble(App(context=context), spec, nag=False)
    assert registered == [(app, spec)]


def test_the_pack_names_its_rules() -> None:
    assert DataPerimeterChecks(App(), SPEC).rule_ids == [
        f"{PACK_NAME}-{suffix}" for suffix in ("AP1", "AP2", "RP1", "VPCE1", "VPCE2", "EC1", "SM1", "SM2", "SM3")
    ]
