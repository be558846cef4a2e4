"""The data account's template: bucket, key and access points, as the spec and policies/ say."""

from __future__ import annotations

import json

from aws_cdk.assertions import Match, Template

from policies import access_point_policy, bucket_policy, key_policy
from policies.verify.extract import extract_from_assembly
from tests.stacks.conftest import REPO, Assembly


def _bucket(assembly: Assembly) -> dict:
    buckets = assembly.resources("data", "AWS::S3::Bucket")
    return next(b for b in buckets.values() if b["Properties"].get("BucketName") == assembly.spec.data.bucket_name)


def test_bucket_is_private_encrypted_with_bucket_keys_and_versioned(default_assembly: Assembly) -> None:
    props = _bucket(default_assembly)["Properties"]
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    rule = props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms"
    assert "KMSMasterKeyID" in rule["ServerSideEncryptionByDefault"]
    assert rule["BucketKeyEnabled"] is True
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    assert props["LoggingConfiguration"]["DestinationBucketName"]
    lifecycle = props["LifecycleConfiguration"]["Rules"][0]
    assert (
        lifecycle["NoncurrentVersionExpiration"]["NoncurrentDays"] == default_assembly.spec.data.noncurrent_version_days
    )


def test_overwritten_checkpoint_copies_expire_after_a_day_and_the_datasets_keep_theirs(
    default_assembly: Assembly,
) -> None:
    rules = {rule["Id"]: rule for rule in _bucket(default_assembly)["Properties"]["LifecycleConfiguration"]["Rules"]}
    replica = rules["expire-overwritten-checkpoint-copies"]
    assert replica["Prefix"] == "checkpoints/runs/" and replica["Status"] == "Enabled"
    assert replica["NoncurrentVersionExpiration"] == {"NoncurrentDays": 1}
    assert "Prefix" not in rules["expire-noncurrent-versions"]


def test_access_log_bucket_is_private_and_tls_only(default_assembly: Assembly) -> None:
    template = Template.from_json(default_assembly.templates["data"])
    template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "BucketName": default_assembly.spec.data.log_bucket_name,
            "PublicAccessBlockConfiguration": Match.object_like({"BlockPublicPolicy": True}),
        },
    )


def test_bucket_policy_is_exactly_the_builders_and_only_delegates(default_assembly: Assembly) -> None:
    spec = default_assembly.spec
    policies = [
        p["Properties"]
        for p in default_assembly.resources("data", "AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == spec.data.bucket_name
    ]
    assert len(policies) == 1
    # The template names the managed key by Fn::GetAtt; the extractor resolves it as CloudFormation would.
    extracted = extract_from_assembly(default_assembly.out, spec)
    document = extracted.bucket_policy
    assert document == bucket_policy(spec, extracted.key_arn)
    assert policies[0]["PolicyDocument"] != document, "the key ARN is a reference to the key, not a literal"
    tls = [s for s in document["Statement"] if s["Sid"] == "DenyRequestsWithoutTls"]
    assert tls and tls[0]["Effect"] == "Deny" and tls[0]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    for statement in document["Statement"]:
        if statement["Effect"] == "Allow":
            # Delegation only: every grant depends on the request coming through this account's access points.
            # ... and only through the spec's access points, by ARN (not every access point of the account).
            assert statement["Condition"]["StringEquals"]["s3:DataAccessPointArn"] == [
                spec.access_point_arn(d) for d in spec.data.datasets
            ]
            assert not any("Delete" in a or a.endswith("*") for a in _list(statement["Action"]))


def test_key_policy_is_exactly_the_builders_and_key_rotates(default_assembly: Assembly) -> None:
    keys = default_assembly.resources("data", "AWS::KMS::Key")
    assert len(keys) == 1
    props = next(iter(keys.values()))["Properties"]
    assert props["EnableKeyRotation"] is True
    assert props["KeyPolicy"] == key_policy(default_assembly.spec)
    for statement in props["KeyPolicy"]["Statement"]:
        if statement["Principal"] != {"AWS": f"arn:aws:iam::{default_assembly.spec.accounts.data}:root"}:
            assert statement["Condition"]["StringEquals"]["kms:ViaService"] == "s3.us-east-1.amazonaws.com"


def test_one_vpc_origin_access_point_per_dataset_with_scoped_policy(default_assembly: Assembly) -> None:
    spec = default_assembly.spec
    access_points = {
        ap["Properties"]["Name"]: ap["Properties"]
        for ap in default_assembly.resources("data", "AWS::S3::AccessPoint").values()
    }
    assert set(access_points) == {d.access_point for d in spec.data.datasets}
    for dataset in spec.data.datasets:
        props = access_points[dataset.access_point]
        assert props["VpcConfiguration"] == {"VpcId": spec.network.vpc_id}
        assert all(props["PublicAccessBlockConfiguration"].values())
        assert len(props["PublicAccessBlockConfiguration"]) == 4
        assert props["Policy"] == access_point_policy(spec, dataset)
        for statement in props["Policy"]["Statement"]:
            assert statement["Principal"] == {"AWS": f"arn:aws:iam::{spec.accounts.compute}:root"}
            assert "aws:PrincipalArn" in statement["Condition"]["ArnLike"]
            for resource in _list(statement["Resource"]):
                assert resource == spec.access_point_arn(dataset) or resource.startswith(
                    f"{spec.access_point_arn(dataset)}/object/{dataset.prefix}"
                )


def _list(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else value


def test_synth_says_what_the_gateway_endpoint_id_would_add(default_assembly: Assembly) -> None:
    """Issue 14: until network.s3_gateway_endpoint_id is set, synth warns that aws:SourceVpce would follow."""
    from aws_cdk import App, Environment
    from aws_cdk.assertions import Annotations, Match

    from stacks.data_stack import DataStack

    spec = default_assembly.spec
    unpinned = spec.model_copy(update={"network": spec.network.model_copy(update={"s3_gateway_endpoint_id": None})})
    env = Environment(account=spec.accounts.data, region=spec.region)
    flags = json.loads((REPO / "cdk.json").read_text())["context"]  # the feature flags the CLI passes
    for given, warned in ((unpinned, True), (spec, False)):
        stack = DataStack(App(context=flags), "Data", given, env=env)
        warnings = Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp(".*aws:SourceVpce.*"))
        assert bool(warnings) is warned
