"""How a request becomes independent layers, and what the harness refuses to accept from the engine."""

from __future__ import annotations

import pytest

from policies.verify.harness import layers
from policies.verify.harness.engine import ALLOWED, IMPLICITLY_DENIED, Engine, EngineResult, PolicyAnalysis
from policies.verify.harness.layers import (
    NEUTRAL_IDENTITY,
    NEUTRAL_RESOURCE,
    HarnessError,
    kms_call_for,
    layers_for,
    outcome,
)
from policies.verify.harness.model import (
    AccessPointTarget,
    ApiRequest,
    KmsRequest,
    Network,
    PolicySet,
    Principal,
    S3Request,
)
from policies.verify.matrix import CaseResult, evaluate
from tests.policies.conftest import PolicyWorld

ROLE = "arn:aws:iam::111111111111:role/llm-demo-cluster-node"
AP = "arn:aws:s3:us-east-1:222222222222:accesspoint/data"
KEY = "arn:aws:kms:us-east-1:222222222222:key/k"
DOC = {
    "Version": "2012-10-17",
    "Statement": [{"Sid": "Read", "Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}],
}
POLICIES = PolicySet(
    documents={
        "bucket": DOC,
        "endpoint": DOC,
        "key": DOC,
        "access-point:data": DOC,
        "identity:llm-demo-cluster-node/datasets": DOC,
    },
    role_arns={"llm-demo-cluster-node": ROLE},
    organization_id="o-a1b2c3d4e5",
    organization_accounts=frozenset({"111111111111", "222222222222"}),
)
READER = Principal("cluster-node", ROLE, "o-a1b2c3d4e5", role="llm-demo-cluster-node")


def _read(**changes: object) -> S3Request:
    base = S3Request(
        READER, "s3:GetObject", "bucket", "222222222222", key="data/x", access_point=AccessPointTarget(AP, True)
    )
    return S3Request(**{**base.__dict__, **changes})


def _layers(request: S3Request | KmsRequest) -> dict[str, dict]:
    return {
        layer.name: layer.simulation
        for layer in layers_for(request, POLICIES, KEY, ("alias/k",), "s3.us-east-1.amazonaws.com")
    }


def test_a_read_through_an_access_point_has_seven_independent_layers() -> None:
    layers = _layers(_read())
    assert list(layers) == ["identity", "endpoint", "endpoint-bucket", "access-point", "bucket", "kms-identity", "key"]
    # Each layer: its own policy real, the others neutral.
    assert layers["identity"]["resourcePolicy"] == NEUTRAL_RESOURCE
    assert layers["access-point"]["identityPolicies"] == [{"name": "neutral", "policy": NEUTRAL_IDENTITY}]
    assert layers["endpoint"]["vpcEndpointPolicies"][0]["policy"] == DOC
    assert layers["endpoint"]["request"]["resource"]["resource"] == f"{AP}/object/data/x"
    assert layers["endpoint-bucket"]["request"]["resource"]["resource"] == "arn:aws:s3:::bucket/data/x"
    assert layers["bucket"]["request"]["contextVariables"]["s3:DataAccessPointArn"] == AP
    assert layers["key"]["request"]["action"] == "kms:Decrypt"
    assert layers["key"]["request"]["contextVariables"]["kms:ViaService"] == "s3.us-east-1.amazonaws.com"


def test_layers_follow_the_request_path() -> None:
    direct = _layers(_read(access_point=None, network=Network(through_endpoint=False, origin="Internet")))
    assert list(direct) == ["identity", "bucket", "kms-identity", "key"]
    outside = _layers(
        _read(ours=False, access_point=AccessPointTarget("arn:aws:s3:us-east-1:333333333333:accesspoint/x", False))
    )
    assert list(outside) == ["identity", "endpoint", "endpoint-bucket"], "other accounts' policies are not ours"
    listing = _layers(_read(action="s3:ListBucket", key=None, list_prefix="data/"))
    assert "key" not in listing and listing["access-point"]["request"]["contextVariables"]["s3:prefix"] == "data/"


def test_s3_asks_kms_to_decrypt_reads_and_generate_keys_for_writes() -> None:
    assert kms_call_for(_read(), KEY, (), "s3").action == "kms:Decrypt"  # type: ignore[union-attr]
    assert kms_call_for(_read(action="s3:PutObject"), KEY, (), "s3").action == "kms:GenerateDataKey"  # type: ignore[union-attr]
    assert kms_call_for(_read(action="s3:DeleteObject"), KEY, (), "s3") is None


def test_control_policies_become_layers_for_members_of_the_organization() -> None:
    with_scp = PolicySet(
        {**POLICIES.documents, "scp:0": DOC, "rcp:0": DOC},
        POLICIES.role_arns,
        POLICIES.organization_id,
        POLICIES.organization_accounts,
    )
    names = [layer.name for layer in layers_for(_read(), with_scp, KEY, (), "s3.us-east-1.amazonaws.com")]
    assert "scp" in names and "rcp" in names
    outsider = Principal("outsider", "arn:aws:iam::333333333333:role/x", None)
    names = [layer.name for layer in layers_for(_read(principal=outsider), with_scp, KEY, (), "s3")]
    assert "scp" not in names and "rcp" in names, "SCPs bind the organization's principals, RCPs its resources"


def test_identity_policies_must_exist_for_a_role_of_ours() -> None:
    ghost = Principal("ghost", "arn:aws:iam::111111111111:role/ghost", None, role="ghost")
    with pytest.raises(HarnessError, match="role ghost: no identity policies"):
        layers_for(_read(principal=ghost), POLICIES, KEY, (), "s3")


def test_a_call_to_another_service_by_a_role_of_ours_has_its_identity_layer() -> None:
    instance = "arn:aws:ec2:us-east-1:111111111111:instance/i-0123456789abcdef0"
    by_role = ApiRequest(READER, "ssm:StartSession", instance, "111111111111", "ssm", "instance")
    layers = {layer.name: layer for layer in layers_for(by_role, POLICIES, KEY, (), "s3")}
    assert list(layers) == ["identity"], "no ssm endpoint policy and no SCP in this policy set"
    assert layers["identity"].policy_ids == ("identity:llm-demo-cluster-node/datasets",)
    assert layers["identity"].simulation["identityPolicies"][0]["name"] == "datasets"
    assert layers["identity"].expected_resource_type == "instance"
    someone = ApiRequest(Principal("x", ROLE, None), "ssm:StartSession", instance, "111111111111", "ssm", "instance")
    assert layers_for(someone, POLICIES, KEY, (), "s3") == [], "another principal's identity is not ours"


def _result(
    decision: str, resource_type: str = "accesspointobject", ignored: frozenset[str] = frozenset()
) -> EngineResult:
    analysis = PolicyAnalysis(decision, (), (), ())
    return EngineResult(
        decision, ignored, resource_type, {"identity": analysis, "resource": analysis, "endpoint": analysis}
    )


def test_outcome_refuses_an_unexpected_resource_type_or_ignored_key() -> None:
    layer = next(layer for layer in layers_for(_read(), POLICIES, KEY, (), "s3") if layer.name == "access-point")
    assert outcome(layer, _result(ALLOWED)).decision == ALLOWED
    with pytest.raises(HarnessError, match="read the resource as 'object'"):
        outcome(layer, _result(ALLOWED, "object"))
    with pytest.raises(HarnessError, match="ignored context keys"):
        outcome(layer, _result(ALLOWED, ignored=frozenset({"s3:prefix"})))
    bucket = next(layer for layer in layers_for(_read(), POLICIES, KEY, (), "s3") if layer.name == "bucket")
    assert bucket.expected_ignored == {
        "s3:DataAccessPointAccount",
        "s3:DataAccessPointArn",
        "s3:AccessPointNetworkOrigin",
    }


def test_a_bucket_policy_need_not_allow_a_caller_of_its_own_account() -> None:
    """IAM: within one account an Allow in the identity policy suffices; the bucket policy only must not deny. Across
    accounts the resource policy must allow, and a disagreement stays an error."""
    silent = PolicyAnalysis(IMPLICITLY_DENIED, (), (), ())  # the engine's answer: no statement allows

    def bucket_layer(principal: Principal) -> layers.Layer:
        request = _read(principal=principal, access_point=None, network=Network(through_endpoint=False))
        return next(layer for layer in layers_for(request, POLICIES, KEY, (), "s3") if layer.name == "bucket")

    own = Principal("data admin", "arn:aws:iam::222222222222:role/storage-admin", "o-a1b2c3d4e5")
    result = EngineResult(ALLOWED, frozenset(), "object", {"resource": silent})
    assert outcome(bucket_layer(own), result).decision == ALLOWED
    with pytest.raises(HarnessError, match="the layer's own analysis says ImplicitlyDenied"):
        outcome(bucket_layer(READER), result)


def test_leaving_out_statements_that_cannot_apply_changes_no_decision(
    world: PolicyWorld, matrix: list[CaseResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(layers, "PRUNE_STATEMENTS", False)
    unpruned = evaluate(world.cases, world.policies, world.context, Engine())
    for pruned, full in zip(matrix, unpruned, strict=True):
        assert pruned.decision == full.decision, pruned.case.case_id
        assert pruned.denials == full.denials, pruned.case.case_id
        assert [(layer.allow_sids, layer.deny_sids) for layer in pruned.layers] == [
            (layer.allow_sids, layer.deny_sids) for layer in full.layers
        ]
