"""Issue 14: the ways out around the access point path, checked on the synthesized templates and in the matrix.

Each test names the side channel it closes; docs/security.md lists them with the layer that closes each.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from policies.verify.harness.engine import ALLOWED
from policies.verify.harness.layers import BUCKET, INTERFACE_ENDPOINT, KMS_IDENTITY, SCP
from policies.verify.matrix import CaseResult, explicit, implicit, merge
from tests.policies.conftest import PolicyWorld
from tests.stacks.conftest import Assembly


def _statements(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["Sid"]: s for s in document["Statement"]}


def _by_id(matrix: list[CaseResult]) -> dict[str, CaseResult]:
    return {r.case.case_id: r for r in matrix}


# ---- 1. interface endpoints --------------------------------------------------------------------------

POLICYLESS_SERVICES = {"ssmmessages", "ec2messages", "notebook"}


def _interface_endpoints(assembly: Assembly) -> dict[str, dict[str, Any]]:
    found = {}
    for resource in assembly.resources("network", "AWS::EC2::VPCEndpoint").values():
        props = resource["Properties"]
        if props.get("VpcEndpointType") == "Interface":
            name = json.dumps(props["ServiceName"])
            service = name.split(".us-east-1.")[-1].rstrip('"').split('"')[0]
            found[service] = props
    return found


def test_every_interface_endpoint_that_takes_a_policy_has_one(default_assembly: Assembly) -> None:
    endpoints = _interface_endpoints(default_assembly)
    assert {"logs", "ecr.api", "ecr.dkr", "sts", "cloudformation", "kms", "ec2", "ssm"} <= set(endpoints)
    missing = sorted(s for s, props in endpoints.items() if "PolicyDocument" not in props)
    assert missing == sorted(POLICYLESS_SERVICES & set(endpoints))


def test_interface_endpoint_policies_admit_the_organization_and_aws_services(world: PolicyWorld) -> None:
    org = world.spec.organization_id
    for service, document in world.extracted.interface_endpoints.items():
        if document is None:
            continue
        statements = _statements(document)
        assert statements["AwsServicePrincipalsOnOurBehalf"]["Condition"] == {
            "Bool": {"aws:PrincipalIsAWSService": "true"}
        }, service
        if service == "sts":
            # Only our roles; not every role of the organization.
            assert (
                statements["OrgPrincipalsAssumeOurRolesOnly"]["Resource"] == "arn:aws:iam::111111111111:role/llm-demo-*"
            )
            assert "OrgPrincipalsToOrgResources" not in statements
        else:
            assert statements["OrgPrincipalsToOrgResources"]["Condition"] == {
                "StringEquals": {"aws:PrincipalOrgID": org, "aws:ResourceOrgID": org}
            }, service


def test_interface_endpoint_policies_are_extractable_for_other_oracles(default_assembly: Assembly) -> None:
    from policies.verify.extract import extract_endpoint_policies

    policies = extract_endpoint_policies(default_assembly.out, default_assembly.spec)
    assert policies["s3"] is not None and policies["dynamodb"] is not None
    assert policies["ssmmessages"] is None
    assert "OrgPrincipalsToOrgResources" in json.dumps(policies["logs"])


@pytest.mark.parametrize(
    "case_id",
    [
        "endpoint/logs/writes-log-events-into-a-log-group-of-account-333333333333",
        "endpoint/ecr-dkr/pushes-a-layer-to-a-repository-of-account-333333333333",
        "endpoint/sts/assumes-a-role-of-account-333333333333",
        "endpoint/sts/assumes-another-role-of-the-organization",
        "endpoint/cloudformation/creates-a-stack-in-account-333333333333-data-in-its-parameters",
        "endpoint/kms/encrypts-with-a-key-of-account-333333333333",
        "endpoint-outside-credentials/logs/puts-its-log-events",
        "endpoint-outside-credentials/ecr-api/reads-the-manifest-of-the-compute-account-s-nemo-image",
    ],
)
def test_exfiltration_through_interface_endpoints_is_denied(matrix: list[CaseResult], case_id: str) -> None:
    result = _by_id(matrix)[case_id.replace("ecr-dkr", "ecr.dkr").replace("ecr-api", "ecr.api")]
    assert result.as_expected, result.mismatches()
    assert result.denials == implicit(INTERFACE_ENDPOINT)


def test_the_platform_still_calls_through_its_endpoints(matrix: list[CaseResult]) -> None:
    allowed = [r for r in matrix if r.case.group == "endpoints" and r.case.expect_allowed]
    assert {r.case.request.endpoint for r in allowed} >= {"logs", "ecr.api", "ecr.dkr", "sts", "ec2", "ssm", "kms"}  # type: ignore[union-attr]
    assert all(r.decision == ALLOWED for r in allowed), [r.case.case_id for r in allowed if r.decision != ALLOWED]
    assert _by_id(matrix)["endpoint/ec2/launches-an-amazon-owned-parallelcluster-ami"].decision == ALLOWED


# ---- 2. AWS-owned bucket names ------------------------------------------------------------------------


def test_aws_owned_bucket_names_hold_no_wildcard(world: PolicyWorld) -> None:
    statements = _statements(world.extracted.endpoint_policy)
    for sid in ("ReadAwsOwnedBucketsNodesNeed", "SignalCloudFormation"):
        resources = statements[sid]["Resource"]
        for arn in [resources] if isinstance(resources, str) else resources:
            bucket = arn.removeprefix("arn:aws:s3:::").split("/", 1)[0]
            assert "*" not in bucket and "?" not in bucket, arn
    assert "cloudformation-custom-resource-response" not in json.dumps(world.extracted.endpoint_policy)


# ---- 3. encryption ------------------------------------------------------------------------------------


def test_bucket_policy_denies_writes_with_another_encryption(world: PolicyWorld) -> None:
    statements = _statements(world.extracted.bucket_policy)
    key = statements["DenyWritesWithOtherKey"]["Condition"]["StringNotEquals"]
    assert key == {"s3:x-amz-server-side-encryption-aws-kms-key-id": world.extracted.key_arn}
    assert statements["DenyWritesWithCustomerKeys"]["Condition"] == {
        "Null": {"s3:x-amz-server-side-encryption-customer-algorithm": "false"}
    }
    assert statements["DenyWritesWithOtherEncryption"]["Effect"] == "Deny"


def test_writes_with_a_wrong_key_are_denied_and_with_the_right_one_allowed(matrix: list[CaseResult]) -> None:
    results = _by_id(matrix)
    tag = "pretraining/head-node"
    assert results[f"write-with-dataset-key/{tag}"].decision == ALLOWED
    assert results[f"write-multipart-part/{tag}"].decision == ALLOWED
    assert results[f"write-with-other-key/{tag}"].denials == merge(
        explicit(BUCKET, "DenyWritesWithOtherKey"), implicit(KMS_IDENTITY)
    )
    assert results[f"write-with-aws-managed-key/{tag}"].denials[BUCKET] == {"DenyWritesWithOtherKey"}
    assert results[f"write-with-customer-key/{tag}"].denials == explicit(BUCKET, "DenyWritesWithCustomerKeys")
    assert BUCKET in results[f"write-with-sse-s3/{tag}"].denials


# ---- 4. access points pinned --------------------------------------------------------------------------


def test_bucket_delegates_to_the_spec_access_point_arns(world: PolicyWorld) -> None:
    statements = _statements(world.extracted.bucket_policy)
    wanted = [world.spec.access_point_arn(d) for d in world.spec.data.datasets]
    for sid in ("DelegateListToOwnAccessPoints", "DelegateObjectAccessToOwnAccessPoints"):
        assert statements[sid]["Condition"] == {"StringEquals": {"s3:DataAccessPointArn": wanted}}


def test_a_new_access_point_reaches_nothing(matrix: list[CaseResult]) -> None:
    results = _by_id(matrix)
    for case_id in ("new-data-account-access-point", "new-data-account-access-point-by-admin"):
        assert results[case_id].as_expected and BUCKET in results[case_id].denials, case_id
    assert results["guardrail-create-internet-access-point"].denials == explicit(SCP, "DenyAccessPointsOutsideVpc")
    assert results["guardrail-create-vpc-access-point"].decision == ALLOWED


# ---- 5. the network path ------------------------------------------------------------------------------


def test_access_points_require_the_gateway_endpoint(world: PolicyWorld) -> None:
    wanted = world.spec.network.s3_gateway_endpoint_id
    assert wanted is not None
    for name, facts in world.extracted.access_points.items():
        for statement in facts.policy["Statement"]:
            assert statement["Condition"]["StringEquals"]["aws:SourceVpce"] == wanted, name


def test_a_second_s3_endpoint_in_the_vpc_reaches_nothing(matrix: list[CaseResult]) -> None:
    result = _by_id(matrix)["other-s3-endpoint-in-the-vpc"]
    assert result.as_expected and result.decision != ALLOWED


# ---- 6. interactive access ----------------------------------------------------------------------------


def test_sessions_and_presigned_urls_are_guarded(matrix: list[CaseResult]) -> None:
    results = _by_id(matrix)
    assert results["guardrail-session-by-non-operator"].denials == explicit(
        SCP, "DenySessionsOnInstancesExceptOperators"
    )
    assert results["guardrail-presigned-url-outside-vpc"].denials == explicit(
        SCP, "DenyPresignedNotebookUrlsOutsideVpc"
    )
    assert results["endpoint/ssm/opens-a-session-on-a-node-operator"].decision == ALLOWED
    assert results["endpoint/sagemaker.api/opens-the-notebook-presigned-url"].decision == ALLOWED


# ---- 7. key bound to the bucket, access logs ---------------------------------------------------------


def test_key_policy_is_bound_to_the_dataset_bucket(world: PolicyWorld, matrix: list[CaseResult]) -> None:
    assert world.extracted.key_policy is not None
    bucket = world.spec.bucket_arn
    for sid in ("DatasetPrincipalsDecryptThroughS3", "DatasetWritersEncryptThroughS3"):
        condition = _statements(world.extracted.key_policy)[sid]["Condition"]
        assert condition["StringLike"] == {"kms:EncryptionContext:aws:s3:arn": [bucket, f"{bucket}/*"]}
    assert _by_id(matrix)["key-for-another-bucket/head-node"].as_expected


def test_access_logs_and_their_old_versions_are_kept_for_years(default_assembly: Assembly) -> None:
    buckets = default_assembly.resources("data", "AWS::S3::Bucket")
    logs = next(b for b in buckets.values() if b["Properties"].get("BucketName", "").endswith("-logs"))
    [rule] = logs["Properties"]["LifecycleConfiguration"]["Rules"]
    assert rule["ExpirationInDays"] >= 1096
    assert rule["NoncurrentVersionExpiration"]["NoncurrentDays"] >= 1096
