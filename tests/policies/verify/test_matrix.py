"""The access matrix of the default deployment, evaluated by the IAM engine over the synthesized policies."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies.principals import principal
from policies.verify.extract import from_builders
from policies.verify.harness.engine import ALLOWED, Engine
from policies.verify.harness.layers import ACCESS_POINT, BUCKET, ENDPOINT, ENDPOINT_BUCKET, IDENTITY, KEY
from policies.verify.harness.model import ApiRequest
from policies.verify.matrix import (
    CaseResult,
    build_cases,
    evaluate,
    explicit,
    implicit,
    load_control_policies,
    matrix_context,
    merge,
    policy_set,
)
from policies.verify.matrix.cases import case_family
from spec import DEFAULT_SPEC_PATH, SpecError, parse_spec
from tests.policies.conftest import PolicyWorld
from tests.spec.test_users import GROUPS, USERS


def _by_id(results: list[CaseResult]) -> dict[str, CaseResult]:
    return {r.case.case_id: r for r in results}


def _failures(results: list[CaseResult]) -> str:
    return "\n".join(f"{r.case.case_id}: {'; '.join(r.mismatches())}" for r in results if not r.as_expected)


def test_matrix_holds_every_case(matrix: list[CaseResult]) -> None:
    assert len(matrix) >= 40
    assert _failures(matrix) == ""
    allowed = sum(r.decision == ALLOWED for r in matrix)
    print(f"\naccess matrix: {len(matrix)} cases ({allowed} allowed, {len(matrix) - allowed} denied), all as expected")
    assert allowed >= 10 and len(matrix) - allowed >= 30


def test_every_reader_and_writer_has_its_grants_and_their_nearest_denials(world: PolicyWorld) -> None:
    ids = {case.case_id for case in world.cases}
    for dataset in world.spec.data.datasets:
        for ref in dataset.readers:
            for kind in ("read", "list", "read-sibling-prefix", "list-sibling-prefix", "delete", "list-versions"):
                assert f"{kind}/{dataset.name}/{ref}" in ids
            for kind in ("read-bucket-directly", "list-bucket-directly"):
                assert f"{kind}/{dataset.name}/{ref}" in ids
            if ref not in dataset.writers:
                assert f"write-through-read-grant/{dataset.name}/{ref}" in ids
        for ref in dataset.writers:
            for kind in ("write", "write-beside-output", "delete-output"):
                assert f"{kind}/{dataset.name}/{ref}" in ids


def test_the_fixed_threats_are_all_in_the_matrix(world: PolicyWorld) -> None:
    ids = {case.case_id for case in world.cases}
    threats = {
        "same-role-name-other-account",
        "compute-account-access-point",
        "outside-account-access-point",
        "no-tls",
        "internet-origin-read/pretraining",
        "exfiltration-outside-bucket",
        "exfiltration-by-admin",
        "outside-organization-credentials",
        "list-whole-access-point",
        "unrelated-role-read/pretraining",
        "decrypt-outside-s3/cluster-node",
        "endpoint-lists-only-bucket-arns",
        "read-bucket-directly/pretraining/cluster-node",
        "write-through-read-grant/pretraining/cluster-node",
    }
    assert threats <= ids


def test_defense_in_depth_is_recorded_layer_by_layer(matrix: list[CaseResult]) -> None:
    results = _by_id(matrix)
    outsider = results["outside-organization-credentials"]
    assert outsider.denials == merge(
        implicit(ENDPOINT, ENDPOINT_BUCKET, ACCESS_POINT, KEY), explicit(BUCKET, "DenyPrincipalsOutsideOrganization")
    )
    assert results["no-tls"].denials == explicit(BUCKET, "DenyRequestsWithoutTls")
    assert results["internet-origin-read/pretraining"].denials == implicit(ACCESS_POINT)
    assert results["exfiltration-by-admin"].denials == implicit(ENDPOINT)
    several = [r for r in matrix if len(r.denials) >= 2]
    assert len(several) >= 40, "most denials must hold on more than one layer"


def test_every_denial_says_which_statement_decides(matrix: list[CaseResult]) -> None:
    for result in matrix:
        for layer in result.layers:
            if layer.decision != ALLOWED:
                assert layer.reasons, f"{result.case.case_id}/{layer.layer}: no reason recorded"
    reasons = {
        layer.layer: layer.reasons for layer in _by_id(matrix)["read-sibling-prefix/pretraining/notebook"].layers
    }
    assert reasons[ACCESS_POINT] == ("no Allow statement covers this action on this resource",)
    unrelated = {layer.layer: layer.reasons for layer in _by_id(matrix)["unrelated-role-read/pretraining"].layers}
    assert unrelated[ACCESS_POINT] == ("ReadersGetUnderDatasetPrefix: does not apply (ArnLike aws:PrincipalArn)",)


def test_the_harness_decides_the_bucket_delegation_in_the_open(matrix: list[CaseResult]) -> None:
    results = _by_id(matrix)
    bucket = next(layer for layer in results["compute-account-access-point"].layers if layer.layer == BUCKET)
    assert bucket.reasons == (
        "DelegateObjectAccessToOwnAccessPoints: StringEquals s3:DataAccessPointArn "
        "['arn:aws:s3:us-east-1:222222222222:accesspoint/llm-demo-pretraining', "
        "'arn:aws:s3:us-east-1:222222222222:accesspoint/llm-demo-finetuning', "
        "'arn:aws:s3:us-east-1:222222222222:accesspoint/llm-demo-models', "
        "'arn:aws:s3:us-east-1:222222222222:accesspoint/llm-demo-checkpoints'] fails "
        "(request: arn:aws:s3:us-east-1:111111111111:accesspoint/shadow-llm-demo-pretraining)",
    )
    allowed = next(layer for layer in results["read/pretraining/cluster-node"].layers if layer.layer == BUCKET)
    assert allowed.allow_sids == ("DelegateObjectAccessToOwnAccessPoints",)


def test_a_wrong_expectation_is_reported_not_absorbed(world: PolicyWorld, engine: Engine) -> None:
    from dataclasses import replace

    no_tls = next(case for case in world.cases if case.case_id == "no-tls")
    wrong = replace(no_tls, denials={})
    [result] = evaluate([wrong], world.policies, world.context, engine)
    assert result.mismatches() == [
        "decision ExplicitlyDenied, expected Allowed",
        "bucket: denies explicitly (DenyRequestsWithoutTls), expected allows",
    ]


def _default_doc() -> dict[str, Any]:
    return yaml.safe_load(DEFAULT_SPEC_PATH.read_text())


def _variant_results(doc: dict[str, Any], engine: Engine, base: Path | None = None) -> list[CaseResult]:
    spec = parse_spec(doc)
    extracted = from_builders(spec)
    context = matrix_context(spec, extracted)
    return evaluate(build_cases(spec, context), policy_set(extracted, spec, base), context, engine)


def _organization_unbound(doc: dict[str, Any]) -> None:
    doc["perimeter"]["organization_bound"] = False


def _vpc_origin_on_bucket(doc: dict[str, Any]) -> None:
    doc["perimeter"]["require_vpc_origin_on_bucket"] = True


def _given_key(doc: dict[str, Any]) -> None:
    doc["data"]["encryption"] = {
        "kms_key_arn": "arn:aws:kms:us-east-1:222222222222:key/0f0e0d0c-0b0a-0908-0706-050403020100"
    }


def _reader_by_arn(doc: dict[str, Any]) -> None:
    doc["data"]["datasets"][1]["readers"].append("arn:aws:iam::111111111111:role/analytics")


def _read_only(doc: dict[str, Any]) -> None:
    for dataset in doc["data"]["datasets"]:
        dataset.pop("writers", None)
        dataset.pop("output_prefix", None)
    doc["data"].pop("checkpoint_replica", None)  # a replica needs a writer


def _endpoint_ids_unknown(doc: dict[str, Any]) -> None:
    """Before phase two: access points fall back to VPC origin, the guardrail to aws:SourceVpc."""
    doc["network"].pop("s3_gateway_endpoint_id")
    doc["network"].pop("sagemaker_api_endpoint_id")


def _no_guardrails_no_operators(doc: dict[str, Any]) -> None:
    doc["perimeter"]["guardrail_scps"] = False
    doc["perimeter"]["operator_roles"] = []


def _no_notebook(doc: dict[str, Any]) -> None:
    doc["notebook"]["enabled"] = False
    for dataset in doc["data"]["datasets"]:
        dataset["readers"] = [r for r in dataset["readers"] if r != "notebook"]


@pytest.mark.parametrize(
    "edit",
    [
        _organization_unbound,
        _vpc_origin_on_bucket,
        _given_key,
        _reader_by_arn,
        _read_only,
        _endpoint_ids_unknown,
        _no_guardrails_no_operators,
        _no_notebook,
    ],
    ids=lambda edit: edit.__name__.strip("_"),
)
def test_the_matrix_follows_the_spec(edit: Any, engine: Engine) -> None:
    doc = _default_doc()
    edit(doc)
    results = _variant_results(doc, engine)
    assert len(results) >= 40
    assert _failures(results) == ""


def test_vpc_origin_option_adds_a_bucket_deny_where_it_should(engine: Engine) -> None:
    doc = _default_doc()
    _vpc_origin_on_bucket(doc)
    results = _by_id(_variant_results(doc, engine))
    assert results["read-bucket-directly/pretraining/cluster-node"].denials == merge(
        implicit(IDENTITY), explicit(BUCKET, "DenyObjectAccessNotFromVpcAccessPoints")
    )
    assert results["internet-origin-read/pretraining"].denials[BUCKET] == {"DenyObjectAccessNotFromVpcAccessPoints"}
    assert BUCKET not in results["internet-origin-list/pretraining"].denials, "the option covers object actions"


SCP = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Sid": "DenyWritesOutsideOrganization",
            "Effect": "Deny",
            "Action": "s3:PutObject",
            "NotResource": [
                "arn:aws:s3:::cloudformation-waitcondition-*/*",
            ],
            "Condition": {"StringNotEqualsIfExists": {"aws:ResourceOrgID": "o-a1b2c3d4e5"}},
        }
    ],
}
RCP = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Sid": "EnforceSecureTransport",
            "Effect": "Deny",
            "Principal": "*",
            "Action": ["s3:*", "kms:*"],
            "Resource": "*",
            "Condition": {"BoolIfExists": {"aws:SecureTransport": "false"}},
        }
    ],
}


def test_organization_policies_from_the_spec_are_layers(tmp_path: Path, engine: Engine) -> None:
    (tmp_path / "rcp.json").write_text(json.dumps(RCP))
    doc = _default_doc()
    doc["perimeter"]["scps"] = [SCP]
    doc["perimeter"]["rcps"] = ["rcp.json"]
    doc["perimeter"]["guardrail_scps"] = False  # only the spec's own SCP (the guardrails have their own cases)
    results = _variant_results(doc, engine, base=tmp_path)
    by_scp = {r.case.case_id for r in results if "scp" in r.denials}
    by_rcp = {r.case.case_id for r in results if "rcp" in r.denials}
    assert by_scp == {
        "exfiltration-outside-bucket",
        "exfiltration-by-admin",
        "exfiltration-outside-access-point",
        "node-writes-aws-owned-bucket",
        "node-writes-squatted-cluster-bucket",
    }
    assert all(r.denials["scp"] == {"DenyWritesOutsideOrganization"} for r in results if "scp" in r.denials)
    assert by_rcp == {"no-tls"}
    for result in results:
        rest = {k: v for k, v in result.denials.items() if k not in ("scp", "rcp")}
        assert rest == dict(result.case.denials), result.case.case_id


def test_an_unreadable_organization_policy_is_a_spec_error(tmp_path: Path) -> None:
    doc = _default_doc()
    doc["perimeter"]["scps"] = ["missing.json"]
    with pytest.raises(SpecError, match=r"perimeter\.scps\[0\]: 'missing.json' cannot be read as JSON"):
        load_control_policies(parse_spec(doc), tmp_path)


@pytest.mark.parametrize(
    "content", ['{"Statement": []}'.encode("utf-16"), b"\xff\xfe\x00binary"], ids=["utf-16", "binary"]
)
def test_a_control_policy_file_that_is_not_utf8_is_one_line_naming_the_field(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "scp.json").write_bytes(content)
    doc = _default_doc()
    doc["perimeter"]["scps"] = ["scp.json"]
    with pytest.raises(
        SpecError, match=r"^spec: perimeter\.scps\[0\]: 'scp.json' is not UTF-8 text \(byte 0xff"
    ) as caught:
        load_control_policies(parse_spec(doc), tmp_path)
    assert len(str(caught.value).splitlines()) == 1


def test_the_nodes_read_their_artifacts_and_nothing_in_the_vpc_writes_there(matrix: list[CaseResult]) -> None:
    """The artifacts bucket (spec.artifacts), through the head node's `artifacts` policy and the endpoint."""
    results = _by_id(matrix)
    for case_id in (
        "head-node-reads-wheelhouse",
        "head-node-lists-wheelhouse",
        "head-node-reads-observability-binaries",
        "head-node-reads-nccl-tests-source",  # docs/fabric-checks.md copies it to /fsx
        "head-node-lists-nccl-tests-source",
    ):
        assert results[case_id].decision == ALLOWED, case_id
        assert "identity:llm-demo-head-node/artifacts" in {
            pid for layer in results[case_id].layers for pid in layer.policy_ids
        }
    for case_id in ("head-node-writes-wheelhouse", "head-node-deletes-wheelhouse", "head-node-reads-beside-wheelhouse"):
        assert results[case_id].denials == implicit(IDENTITY, ENDPOINT), case_id
    assert results["head-node-lists-beside-wheelhouse"].denials == implicit(IDENTITY)
    # The GPU nodes and the notebook have no business there; the endpoint cannot tell roles apart, the roles can.
    assert results["cluster-node-reads-wheelhouse"].denials == implicit(IDENTITY)
    assert results["notebook-reads-wheelhouse"].denials == implicit(IDENTITY)
    assert results["outside-credentials-read-wheelhouse"].denials == implicit(ENDPOINT)
    assert results["head-node-reads-squatted-wheelhouse"].denials == implicit(ENDPOINT)
    assert results["head-node-writes-nccl-tests-source"].denials == implicit(IDENTITY, ENDPOINT)
    assert results["cluster-node-reads-nccl-tests-source"].denials == implicit(IDENTITY)  # the head node copies it


def test_trainium_nodes_read_their_nxdt_wheelhouse(engine: Engine) -> None:
    doc = yaml.safe_load((DEFAULT_SPEC_PATH.parent / "examples" / "trn1-neuron.yaml").read_text())
    results = _variant_results(doc, engine)
    assert _failures(results) == ""
    by_id = _by_id(results)
    assert by_id["cluster-node-reads-nxdt-wheelhouse"].decision == ALLOWED
    assert by_id["cluster-node-writes-nxdt-wheelhouse"].denials == implicit(IDENTITY, ENDPOINT)
    assert by_id["head-node-reads-nxdt-wheelhouse"].denials == implicit(IDENTITY)  # a wheel: the nodes' only
    # ... but NxDT's examples tarball of that folder, which docs/jobs.md unpacks onto /fsx from the head node.
    assert by_id["head-node-reads-nxdt-examples"].decision == ALLOWED
    assert by_id["head-node-plants-nxdt-examples"].denials == implicit(IDENTITY, ENDPOINT)
    assert by_id["cluster-node-reads-wheelhouse"].denials == implicit(IDENTITY)


def test_the_operator_role_opens_sessions_on_the_clusters_nodes_and_reads_no_dataset(
    world: PolicyWorld, matrix: list[CaseResult]
) -> None:
    """The role perimeter.operator_roles names (created by the identity stack), through its real identity policy and
    the guardrail SCP."""
    results = _by_id(matrix)
    for allowed in ("operator/session-on-a-cluster-node", "operator/session-document", "operator/end-own-session"):
        assert results[allowed].decision == ALLOWED, results[allowed].mismatches()
        assert {layer.layer for layer in results[allowed].layers} >= {IDENTITY, "scp"}
    assert results["operator/session-on-another-instance"].denials == implicit(IDENTITY)
    assert results["operator/end-another-callers-session"].denials == implicit(IDENTITY)
    for dataset in world.spec.data.datasets:
        read = results[f"operator/read/{dataset.name}"]
        assert read.decision != ALLOWED
        assert {IDENTITY, ACCESS_POINT} <= set(read.denials), read.denials


def test_with_users_sessions_name_the_run_as_document_and_the_default_shell_is_refused(engine: Engine) -> None:
    """Issue 43: the operator role of a spec with cluster.users, through the builders' documents."""
    doc = _default_doc()
    doc["cluster"].update(users=USERS, groups=GROUPS)
    results = _by_id(_variant_results(doc, engine))
    assert _failures(list(results.values())) == ""
    assert results["operator/session-document"].decision == ALLOWED
    request = results["operator/session-document"].case.request
    assert isinstance(request, ApiRequest) and request.resource.endswith("document/llm-demo-RunShellAsUser")
    assert results["operator/default-shell-document"].denials == implicit(IDENTITY)
    assert results["operator/session-on-a-cluster-node"].decision == ALLOWED


def test_the_data_account_administrator_uploads_under_a_dataset_prefix_straight_to_the_bucket(
    world: PolicyWorld, matrix: list[CaseResult]
) -> None:
    """README's first object (`aws s3 cp ... --profile data`): no access point, from outside the VPC, no encryption
    header; the bucket policy (same account), the dataset key and the guardrail SCP all let it through."""
    results = _by_id(matrix)
    for dataset in world.spec.data.datasets:
        upload = results[f"data-account-upload/{dataset.name}"]
        assert upload.decision == ALLOWED, upload.mismatches()
        assert {layer.layer for layer in upload.layers} == {BUCKET, KEY, "scp"}


def test_a_principals_case_family_that_does_not_exist_is_named() -> None:
    entry = replace(principal("operator"), matrix_cases="policies.verify.matrix.cases.operators:auditor_cases")
    with pytest.raises(
        ValueError, match=r"policies/principals\.py operator: matrix_cases .*has no attribute 'auditor_cases'"
    ):
        case_family(entry)
