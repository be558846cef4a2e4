"""Policies read back from the synthesized templates: intrinsics resolved, and equal to the builders."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from policies import access_point_policy, bucket_policy, gateway_endpoint_policy, identity_policy, key_policy
from policies.interface_endpoints import interface_endpoint_policy
from policies.verify.extract import (
    ExtractionError,
    Resolver,
    StackEnvironment,
    drift_from_builders,
    extract_policies,
    load_templates,
    stack_environments,
)
from tests.policies.conftest import PolicyWorld
from tests.stacks.conftest import Assembly

ENV = StackEnvironment("llm-demo-data", "222222222222", "us-east-1")
TEMPLATE: dict[str, Any] = {
    "Parameters": {"Stage": {"Type": "String", "Default": "prod"}, "Free": {"Type": "String"}},
    "Resources": {
        "Bucket": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": "datasets"}},
        "Logs": {"Type": "AWS::S3::Bucket", "Properties": {}},
        "Role": {"Type": "AWS::IAM::Role", "Properties": {"RoleName": "reader"}},
        "Key": {"Type": "AWS::KMS::Key", "Properties": {}},
        "Vpc": {"Type": "AWS::EC2::VPC", "Properties": {}},
        "Queue": {"Type": "AWS::SQS::Queue", "Properties": {}},
    },
}


@pytest.mark.parametrize(
    ("value", "resolved"),
    [
        ({"Ref": "AWS::Partition"}, "aws"),
        ({"Ref": "AWS::Region"}, "us-east-1"),
        ({"Ref": "AWS::AccountId"}, "222222222222"),
        ({"Ref": "AWS::URLSuffix"}, "amazonaws.com"),
        ({"Ref": "Stage"}, "prod"),
        ({"Ref": "Bucket"}, "datasets"),
        ({"Ref": "Logs"}, "llm-demo-data-Logs"),
        ({"Fn::GetAtt": ["Bucket", "Arn"]}, "arn:aws:s3:::datasets"),
        ({"Fn::GetAtt": "Role.Arn"}, "arn:aws:iam::222222222222:role/reader"),
        ({"Fn::GetAtt": ["Key", "Arn"]}, "arn:aws:kms:us-east-1:222222222222:key/llm-demo-data-Key"),
        (
            {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":iam::", {"Ref": "AWS::AccountId"}, ":root"]]},
            "arn:aws:iam::222222222222:root",
        ),
        ({"Fn::Join": ["", [{"Fn::GetAtt": ["Bucket", "Arn"]}, "/*"]]}, "arn:aws:s3:::datasets/*"),
        ({"Fn::Sub": "arn:${AWS::Partition}:s3:::${Bucket}/${!literal}"}, "arn:aws:s3:::datasets/${literal}"),
        ({"Fn::Sub": "${Role.Arn}"}, "arn:aws:iam::222222222222:role/reader"),
        ({"Fn::Sub": ["${Name}-${AWS::Region}", {"Name": {"Ref": "Bucket"}}]}, "datasets-us-east-1"),
        ({"Fn::Select": [1, {"Fn::Split": ["/", "a/b/c"]}]}, "b"),
        (
            {"Statement": [{"Resource": [{"Ref": "Bucket"}, "plain"]}]},
            {"Statement": [{"Resource": ["datasets", "plain"]}]},
        ),
    ],
)
def test_resolver_turns_intrinsics_into_concrete_values(value: Any, resolved: Any) -> None:
    assert Resolver(TEMPLATE, ENV).resolve(value) == resolved


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            {"Fn::GetAtt": ["Queue", "Arn"]},
            r"policy\.Resource: Fn::GetAtt Queue\.Arn \(AWS::SQS::Queue\) is not resolvable",
        ),
        ({"Ref": "Missing"}, r"refers to 'Missing', which is not a resource of llm-demo-data"),
        ({"Ref": "Free"}, r"Ref Free is a template parameter without a default"),
        ({"Fn::If": ["IsProd", "a", "b"]}, r"intrinsic Fn::If is not resolvable offline"),
        ({"Fn::ImportValue": "Shared"}, r"intrinsic Fn::ImportValue is not resolvable offline"),
    ],
)
def test_resolver_names_what_it_cannot_resolve(value: Any, message: str) -> None:
    with pytest.raises(ExtractionError, match=message):
        Resolver(TEMPLATE, ENV).resolve({"Resource": value}, "policy")


def test_every_policy_document_of_the_assembly_resolves(default_assembly: Assembly) -> None:
    environments = stack_environments(default_assembly.out)
    documents = 0
    for name, environment in environments.items():
        template = json.loads((default_assembly.out / f"{name}.template.json").read_text())
        resolver = Resolver(template, environment)
        for logical, resource in template["Resources"].items():
            props = resource.get("Properties", {})
            for field in ("PolicyDocument", "Policy", "KeyPolicy", "Policies", "AssumeRolePolicyDocument"):
                if field in props:
                    text = json.dumps(resolver.resolve(props[field], f"{logical}.{field}"))
                    assert "Fn::" not in text and '"Ref"' not in text, f"{name}/{logical}.{field}"
                    documents += 1
    assert documents >= 15


def test_templates_attach_exactly_what_the_builders_build(world: PolicyWorld) -> None:
    spec, extracted = world.spec, world.extracted
    assert extracted.bucket_policy == bucket_policy(spec, extracted.key_arn)
    for service, document in extracted.interface_endpoints.items():
        assert document == interface_endpoint_policy(spec, service), service
    assert extracted.endpoint_policy == gateway_endpoint_policy(spec)
    assert extracted.key_policy == key_policy(spec)
    for dataset in spec.data.datasets:
        assert extracted.access_points[dataset.access_point].policy == access_point_policy(spec, dataset)
    for role in spec.builtin_roles_in_use:
        assert extracted.roles[spec.role_name(role)].inline["datasets"] == identity_policy(spec, role)
    assert drift_from_builders(extracted, spec) == []


def test_extraction_finds_every_data_path_policy(world: PolicyWorld) -> None:
    extracted, spec = world.extracted, world.spec
    assert set(extracted.access_points) == {d.access_point for d in spec.data.datasets}
    assert set(extracted.roles) == {spec.role_name(r) for r in ("cluster-node", "head-node", "notebook", "operator")}
    assert set(extracted.roles["llm-demo-operator"].inline) == {"sessions"}  # the operator role's, matrix-evaluated
    assert extracted.roles["llm-demo-cluster-node"].managed_policy_arns == (
        "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
    )
    assert "NotebookLogs" in json.dumps(extracted.roles["llm-demo-notebook"].inline)  # AWS::IAM::Policy by Ref
    assert extracted.key_arn.startswith("arn:aws:kms:us-east-1:222222222222:key/")
    assert extracted.sources["endpoint"].startswith("llm-demo-network/EndpointsS3Gateway")


def test_access_points_are_vpc_only_with_block_public_access(world: PolicyWorld) -> None:
    for facts in world.extracted.access_points.values():
        assert facts.vpc_id == world.spec.network.vpc_id
        assert facts.bucket == world.spec.data.bucket_name
        assert facts.block_public_access == {
            "BlockPublicAcls": True,
            "BlockPublicPolicy": True,
            "IgnorePublicAcls": True,
            "RestrictPublicBuckets": True,
        }


def _templates(default_assembly: Assembly) -> dict[str, dict[str, Any]]:
    return copy.deepcopy(load_templates(default_assembly.out, default_assembly.spec))


def test_drift_between_template_and_builder_is_reported(default_assembly: Assembly) -> None:
    spec = default_assembly.spec
    templates = _templates(default_assembly)
    for resource in templates["data"]["Resources"].values():
        if resource["Type"] == "AWS::S3::AccessPoint" and resource["Properties"]["Name"] == "llm-demo-finetuning":
            resource["Properties"]["Policy"]["Statement"][0]["Resource"] = (
                "arn:aws:s3:us-east-1:222222222222:accesspoint/llm-demo-finetuning/object/*"
            )
    extracted = extract_policies(templates, spec, stack_environments(default_assembly.out))
    assert drift_from_builders(extracted, spec) == [
        "access point llm-demo-finetuning: policy differs from policies.access_point_policy"
    ]


def test_an_endpoint_without_a_policy_is_an_error(default_assembly: Assembly) -> None:
    templates = _templates(default_assembly)
    for resource in templates["network"]["Resources"].values():
        if resource["Type"] == "AWS::EC2::VPCEndpoint":
            resource["Properties"].pop("PolicyDocument", None)
    with pytest.raises(ExtractionError, match=r"EndpointsS3Gateway\w+: the S3 gateway endpoint has the default"):
        extract_policies(templates, default_assembly.spec, stack_environments(default_assembly.out))


def test_a_missing_stack_or_access_point_is_named(default_assembly: Assembly) -> None:
    spec, environments = default_assembly.spec, stack_environments(default_assembly.out)
    templates = _templates(default_assembly)
    del templates["data"]
    with pytest.raises(ExtractionError, match="llm-demo-data: stack template missing"):
        extract_policies(templates, spec, environments)
    templates = _templates(default_assembly)
    resources = templates["data"]["Resources"]
    for logical in [k for k, r in resources.items() if r["Type"] == "AWS::S3::AccessPoint"][:1]:
        del resources[logical]
    with pytest.raises(ExtractionError, match="access point llm-demo-pretraining: not in llm-demo-data"):
        extract_policies(templates, spec, environments)
