"""Mutation testing: every weakening of every data-path policy must break at least one matrix case."""

from __future__ import annotations

import copy

from policies.verify.harness.engine import Engine
from policies.verify.harness.model import PolicySet
from policies.verify.matrix import evaluate
from policies.verify.mutations import (
    MutationReport,
    _widen_key_prefix,
    generate,
    mutable_policy_ids,
)
from tests.policies.conftest import PolicyWorld


def _find(report: MutationReport, policy_id: str, text: str) -> list[str]:
    found = [r for r in report.results if r.mutation.policy_id == policy_id and text in r.mutation.description]
    assert found, f"no mutation of {policy_id} matching {text!r}"
    assert all(r.killed for r in found), [r.mutation.description for r in found if not r.killed]
    return [case for r in found for case in r.killed_by]


def test_mutation_score_is_100_percent(mutation_report: MutationReport) -> None:
    print(f"\n{mutation_report.summary()}")
    survivors = [f"{r.mutation.policy_id}: {r.mutation.description}" for r in mutation_report.survivors]
    assert survivors == []
    assert mutation_report.score == 100.0 and mutation_report.total >= 150


def test_every_operator_is_exercised(mutation_report: MutationReport) -> None:
    operators = {r.mutation.operator for r in mutation_report.results}
    assert operators == {
        "drop-condition",
        "drop-statement",
        "widen-prefix",
        "widen-resource",
        "widen-action",
        "widen-principal",
        "endpoint-drop-access-points",
        "endpoint-drop-buckets",
        "add-public-statement",
    }


def test_the_named_weakenings_are_caught_by_the_cases_that_guard_them(mutation_report: MutationReport) -> None:
    report = mutation_report
    assert "no-tls" in _find(report, "bucket", "DenyRequestsWithoutTls: drop the Deny statement")
    # Without its condition the TLS Deny hits every request: the allowed reads break.
    assert "read/pretraining/cluster-node" in _find(report, "bucket", "drop Bool aws:SecureTransport")
    assert "outside-organization-credentials" in _find(
        report, "bucket", "DenyPrincipalsOutsideOrganization: drop the Deny statement"
    )
    assert "outside-organization-credentials" in _find(
        report, "endpoint", "DatasetsThroughAccessPoints: drop StringEquals aws:PrincipalOrgID"
    )
    assert "new-data-account-access-point" in _find(report, "bucket", "drop StringEquals s3:DataAccessPointArn")
    assert "other-s3-endpoint-in-the-vpc" in _find(
        report, "access-point:llm-demo-pretraining", "ReadersGetUnderDatasetPrefix: drop StringEquals aws:SourceVpce"
    )
    assert "write-with-customer-key/pretraining/head-node" in _find(
        report, "bucket", "DenyWritesWithCustomerKeys: drop the Deny statement"
    )
    assert "write-multipart-part/pretraining/head-node" in _find(
        report, "bucket", "DenyWritesWithOtherKey: drop Null s3:x-amz-server-side-encryption"
    )
    assert "key-for-another-bucket/notebook" in _find(
        report, "key", "DatasetPrincipalsDecryptThroughS3: drop StringLike kms:EncryptionContext:aws:s3:arn"
    )
    assert "endpoint/logs/writes-log-events-into-a-log-group-of-account-333333333333" in _find(
        report, "endpoint:logs", "OrgPrincipalsToOrgResources: drop StringEquals aws:ResourceOrgID"
    )
    assert "endpoint/sts/assumes-a-role-of-account-333333333333" in _find(
        report, "endpoint:sts", "OrgPrincipalsAssumeOurRolesOnly: arn:aws:iam::111111111111:role/llm-demo-* -> *"
    )
    assert "guardrail-create-internet-access-point" in _find(
        report, "scp:guardrails", "DenyAccessPointsOutsideVpc: drop the Deny statement"
    )
    assert "read/pretraining/cluster-node" in _find(report, "endpoint", "endpoint-drop-access-points")
    assert "read/pretraining/cluster-node" in _find(report, "endpoint", "endpoint-drop-buckets")
    assert "read-sibling-prefix/pretraining/notebook" in _find(
        report, "access-point:llm-demo-pretraining", "ReadersGetUnderDatasetPrefix: arn:aws:s3"
    )
    assert "list-sibling-prefix/pretraining/notebook" in _find(
        report, "access-point:llm-demo-pretraining", "StringLike s3:prefix corpora/pretraining/* -> *"
    )
    assert "unrelated-role-read/models" in _find(report, "access-point:llm-demo-models", "add an unconditioned Allow")
    assert "internet-origin-write/checkpoints" in _find(
        report,
        "access-point:llm-demo-checkpoints",
        "WritersPutUnderOutputPrefix: drop StringEquals aws:SourceVpce",
    )
    assert "decrypt-outside-s3/notebook" in _find(
        report, "key", "DatasetPrincipalsDecryptThroughS3: drop StringEquals kms:ViaService"
    )
    assert "compute-admin-decrypts-key" in _find(report, "key", "DataAccountAdministersKey: Principal")
    assert "aws-service-writes-bucket" in _find(report, "bucket", "drop BoolIfExists aws:PrincipalIsAWSService")


def test_skipped_mutants_are_really_equivalent(world: PolicyWorld, engine: Engine) -> None:
    """The equivalence rules are claims; check them: these mutants change no decision of the matrix."""
    key = copy.deepcopy(world.policies.documents["key"])
    for statement in key["Statement"]:
        statement.get("Condition", {}).get("StringEquals", {}).pop("kms:CallerAccount", None)
    access_point = copy.deepcopy(world.policies.documents["access-point:llm-demo-pretraining"])
    for statement in access_point["Statement"]:
        statement["Principal"] = "*"  # aws:PrincipalArn still names the roles
    baseline = evaluate(world.cases, world.policies, world.context, engine)
    for policy_id, document in (("key", key), ("access-point:llm-demo-pretraining", access_point)):
        mutant = evaluate(world.cases, world.policies.with_document(policy_id, document), world.context, engine)
        assert [r.denials for r in mutant] == [r.denials for r in baseline], policy_id
        assert all(r.as_expected for r in mutant)


def test_generator_on_a_small_policy() -> None:
    ap = "arn:aws:s3:us-east-1:222222222222:accesspoint/x"
    policies = PolicySet(
        documents={
            "access-point:x": {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Sid": "Read",
                        "Effect": "Allow",
                        "Principal": {"AWS": "arn:aws:iam::111111111111:root"},
                        "Action": "s3:GetObject",
                        "Resource": f"{ap}/object/data/*",
                        "Condition": {"ArnLike": {"aws:PrincipalArn": "arn:aws:iam::111111111111:role/r"}},
                    }
                ],
            },
            "identity:r/other": {"Version": "2012-10-17", "Statement": []},
        },
        role_arns={},
        organization_id=None,
    )
    assert mutable_policy_ids(policies) == ["access-point:x"], "only the dataset identity policies are mutated"
    mutations = generate(policies)
    assert [m.operator for m in mutations] == [
        "drop-condition",
        "drop-statement",
        "widen-prefix",
        "widen-action",
        "add-public-statement",
    ]
    original = policies.documents["access-point:x"]
    for mutation in mutations:
        assert mutation.policies.documents["access-point:x"] != original
    assert original["Statement"][0]["Condition"], "the original is never modified"


def test_prefix_widening() -> None:
    ap = "arn:aws:s3:us-east-1:222222222222:accesspoint/x"
    assert _widen_key_prefix(f"{ap}/object/data/*") == f"{ap}/object/*"
    assert _widen_key_prefix(f"{ap}/object/*") is None
    assert _widen_key_prefix(ap) is None
    assert _widen_key_prefix("arn:aws:s3:::bucket/data/*") == "arn:aws:s3:::bucket/*"
    assert _widen_key_prefix("arn:aws:s3:::bucket/*") is None
    assert _widen_key_prefix("arn:aws:s3:::bucket") is None
