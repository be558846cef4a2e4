"""The compute account's artifacts stack: the bucket the nodes install from (spec.artifacts), with the controls of
the dataset bucket, readable by the node roles exactly as policies/ says, deployed before the cluster."""

from __future__ import annotations

import json
from typing import Any

from policies.artifacts import ARTIFACTS_POLICY_NAME, artifacts_bucket_policy, artifacts_read_policy
from policies.verify.extract import drift_from_builders, extract_from_assembly
from spec.artifacts import artifacts_bucket_name
from tests.stacks.conftest import Assembly

BUCKET = "llm-demo-artifacts-111111111111"


def _buckets(assembly: Assembly) -> dict[str, dict[str, Any]]:
    found = assembly.resources("artifacts", "AWS::S3::Bucket").values()
    return {b["Properties"]["BucketName"]: b for b in found}


def test_the_artifacts_bucket_has_the_controls_of_the_dataset_bucket(default_assembly: Assembly) -> None:
    spec = default_assembly.spec
    assert artifacts_bucket_name(spec) == BUCKET
    buckets = _buckets(default_assembly)
    assert set(buckets) == {BUCKET, f"{BUCKET}-logs"}
    for name, bucket in buckets.items():
        props = bucket["Properties"]
        assert props["PublicAccessBlockConfiguration"] == dict.fromkeys(
            ("BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"), True
        ), name
        assert props["VersioningConfiguration"] == {"Status": "Enabled"}, name
        assert props["OwnershipControls"] == {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}, name
        # Public wheels and binaries, no secrets: SSE-S3 keeps KMS out of every node's boot (and access logs
        # can only be delivered to SSE-S3 buckets).
        (rule,) = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
        assert rule["ServerSideEncryptionByDefault"] == {"SSEAlgorithm": "AES256"}, name
        assert (bucket["DeletionPolicy"], bucket["UpdateReplacePolicy"]) == ("Retain", "Retain"), name
    props = buckets[BUCKET]["Properties"]
    assert props["LoggingConfiguration"] == {
        "DestinationBucketName": {"Ref": next(k for k, v in _logical(default_assembly).items() if v.endswith("-logs"))},
        "LogFilePrefix": f"{BUCKET}/",
    }
    (rule,) = props["LifecycleConfiguration"]["Rules"]
    assert rule["NoncurrentVersionExpiration"] == {"NoncurrentDays": spec.data.noncurrent_version_days}
    assert rule["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 7}
    (log_rule,) = buckets[f"{BUCKET}-logs"]["Properties"]["LifecycleConfiguration"]["Rules"]
    assert log_rule["ExpirationInDays"] == spec.data.access_log_days


def _logical(assembly: Assembly) -> dict[str, str]:
    return {k: v["Properties"]["BucketName"] for k, v in assembly.resources("artifacts", "AWS::S3::Bucket").items()}


def test_the_bucket_policies_are_the_builders_and_deny_plain_http(default_assembly: Assembly) -> None:
    policies = {
        p["Properties"]["Bucket"] if isinstance(p["Properties"]["Bucket"], str) else json.dumps(p["Properties"]["Bucket"]): p[
            "Properties"
        ]["PolicyDocument"]
        for p in default_assembly.resources("artifacts", "AWS::S3::BucketPolicy").values()
    }  # fmt: skip
    assert policies[BUCKET] == artifacts_bucket_policy(default_assembly.spec)
    (logs,) = [document for bucket, document in policies.items() if bucket != BUCKET]
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        for s in logs["Statement"]
    )


def test_the_node_roles_read_it_through_the_builders_policy(default_assembly: Assembly) -> None:
    spec = default_assembly.spec
    attached = {
        tuple(p["Properties"]["Roles"]): p["Properties"]
        for p in default_assembly.resources("artifacts", "AWS::IAM::Policy").values()
    }
    # The default spec's GPU nodes read nothing there: only the head node gets a policy.
    assert list(attached) == [(spec.role_name("head-node"),)]
    (head,) = attached.values()
    assert head["PolicyName"] == ARTIFACTS_POLICY_NAME
    assert head["PolicyDocument"] == artifacts_read_policy(spec, "head-node")
    extracted = extract_from_assembly(default_assembly.out, spec)
    assert extracted.roles[spec.role_name("head-node")].inline[ARTIFACTS_POLICY_NAME] == head["PolicyDocument"]
    assert drift_from_builders(extracted, spec) == []


def test_it_outputs_its_name_and_deploys_between_the_roles_and_the_cluster(default_assembly: Assembly) -> None:
    spec = default_assembly.spec
    outputs = default_assembly.templates["artifacts"]["Outputs"]
    assert outputs["ArtifactsBucketName"]["Value"] == {
        "Ref": next(iter(k for k, v in _logical(default_assembly).items() if v == BUCKET))
    }
    manifest = json.loads((default_assembly.out / "manifest.json").read_text())
    names = spec.stack_names

    def depends_on(stack: str) -> set[str]:
        return set(manifest["artifacts"][names[stack]].get("dependencies", []))

    assert names["identity"] in depends_on("artifacts")  # its read policy names the roles
    assert names["artifacts"] in depends_on("cluster")  # the head node installs from it at boot
    assert manifest["artifacts"][names["artifacts"]]["environment"] == "aws://111111111111/us-east-1"
