"""The Node entry (policies/verify/engine/simulate.mjs) and the engine's measured gaps, each pinned by a test:
if a new engine version closes a gap, the test fails and the harness's workaround can go."""

from __future__ import annotations

from typing import Any

import pytest

from policies import gateway_endpoint_policy
from policies.verify.harness.engine import (
    ALLOWED,
    EXPLICITLY_DENIED,
    IMPLICITLY_DENIED,
    Engine,
    EngineError,
    policy_actions_and_keys,
    run_discovery,
)
from policies.verify.harness.layers import HarnessError, Layer, outcome
from tests.policies.conftest import PolicyWorld

ROLE = "arn:aws:iam::111111111111:role/llm-demo-cluster-node"
BUCKET = "arn:aws:s3:::llm-demo-datasets-222222222222"
ACCESS_POINT = "arn:aws:s3:us-east-1:222222222222:accesspoint/llm-demo-pretraining"
ALLOW_ALL = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
DELEGATION = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Sid": "Delegate",
            "Effect": "Allow",
            "Principal": {"AWS": "*"},
            "Action": "s3:GetObject",
            "Resource": f"{BUCKET}/*",
            "Condition": {"StringEquals": {"s3:DataAccessPointAccount": "222222222222"}},
        }
    ],
}


def simulation(
    resource: str,
    context: dict[str, Any],
    resource_policy: dict[str, Any] | None = None,
    action: str = "s3:GetObject",
    identity: dict[str, Any] = ALLOW_ALL,
    endpoint: dict[str, Any] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "request": {
            "principal": ROLE,
            "action": action,
            "resource": {"resource": resource, "accountId": "222222222222"},
            "contextVariables": context,
        },
        "identityPolicies": [{"name": "identity", "policy": identity}],
        "serviceControlPolicies": [],
        "resourceControlPolicies": [],
    }
    if resource_policy is not None:
        body["resourcePolicy"] = resource_policy
    if endpoint is not None:
        body["vpcEndpointPolicies"] = [{"name": "endpoint", "policy": endpoint}]
    return body


def test_one_process_answers_a_whole_batch_and_caches_it() -> None:
    engine = Engine()
    batch = {f"case-{i}": simulation(f"{BUCKET}/key-{i}", {}, DELEGATION) for i in range(5)}
    results = engine.run_batch(batch)
    assert engine.processes == 1 and engine.simulations_run == 5
    assert engine.version == "0.1.173"
    assert {r.decision for r in results.values()} == {IMPLICITLY_DENIED}
    engine.run_batch(batch)
    assert engine.processes == 1, "a repeated simulation must come from the cache"


def test_engine_cannot_see_access_point_keys_on_bucket_objects() -> None:
    """The gap the harness decides in the open (policies/verify/harness/conditions.py)."""
    context = {"s3:DataAccessPointAccount": "222222222222", "s3:DataAccessPointArn": ACCESS_POINT}
    strict = Engine().run_batch({"strict": simulation(f"{BUCKET}/corpora/x", context, DELEGATION)})["strict"]
    assert strict.decision == IMPLICITLY_DENIED, "a correct delegation looks denied in Strict mode"
    assert strict.ignored_context_keys == {"s3:DataAccessPointAccount", "s3:DataAccessPointArn"}

    discovery = run_discovery(simulation(f"{BUCKET}/corpora/x", context, DELEGATION))
    assert discovery.decision == ALLOWED
    assert discovery.discovery is not None
    ignored = discovery.discovery["ignoredConditions"]["resource"]["allow"]
    assert ignored == [{"op": "StringEquals", "key": "s3:DataAccessPointAccount", "values": ["222222222222"]}]


def test_engine_sees_the_same_keys_on_access_point_objects() -> None:
    context = {"s3:DataAccessPointAccount": "222222222222", "s3:AccessPointNetworkOrigin": "VPC"}
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"AWS": "arn:aws:iam::111111111111:root"},
                "Action": "s3:GetObject",
                "Resource": f"{ACCESS_POINT}/object/*",
                "Condition": {"StringEquals": {"s3:AccessPointNetworkOrigin": "VPC"}},
            }
        ],
    }
    result = Engine().run_batch({"ap": simulation(f"{ACCESS_POINT}/object/corpora/x", context, policy)})["ap"]
    assert result.decision == ALLOWED and result.ignored_context_keys == frozenset()
    assert result.resource_type == "accesspointobject"


def test_misspelled_context_key_is_dropped_silently_and_the_harness_refuses_it() -> None:
    result = Engine().run_batch(
        {"typo": simulation(f"{BUCKET}/x", {"aws:PrincipalOrgIdd": "o-a1b2c3d4e5"}, DELEGATION)}
    )
    assert result["typo"].ignored_context_keys == {"aws:PrincipalOrgIdd"}
    layer = Layer("bucket", ("bucket",), {}, (), frozenset(), "object")
    with pytest.raises(HarnessError, match=r"ignored context keys \['aws:principalorgidd'\], expected exactly \[\]"):
        outcome(layer, result["typo"])


def test_condition_values_are_case_sensitive() -> None:
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"AWS": "arn:aws:iam::111111111111:root"},
                "Action": "s3:GetObject",
                "Resource": f"{ACCESS_POINT}/object/*",
                "Condition": {"StringEquals": {"s3:AccessPointNetworkOrigin": "Vpc"}},
            }
        ],
    }
    context = {"s3:AccessPointNetworkOrigin": "VPC"}
    result = Engine().run_batch({"case": simulation(f"{ACCESS_POINT}/object/x", context, policy)})["case"]
    assert result.decision == IMPLICITLY_DENIED


def test_any_principal_as_cdk_renders_it_is_rejected_in_endpoint_policies() -> None:
    endpoint = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "s3:GetObject", "Resource": "*"}],
    }
    with pytest.raises(EngineError, match=r"Principal must be .{1,3}\*.{1,3} in an endpoint policy"):
        Engine().run_batch({"cdk-any-principal": simulation(f"{BUCKET}/x", {}, DELEGATION, endpoint=endpoint)})


def test_our_endpoint_policy_uses_the_plain_star_principal(world: PolicyWorld) -> None:
    for document in (world.extracted.endpoint_policy, gateway_endpoint_policy(world.spec)):
        assert {s["Principal"] for s in document["Statement"]} == {"*"}


def test_endpoint_policy_decides_next_to_identity_and_resource() -> None:
    endpoint = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": f"{BUCKET}/corpora/*"}
        ],
    }
    neutral = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": "*", "Action": "*", "Resource": "*"}],
    }
    results = Engine().run_batch(
        {
            "inside": simulation(f"{BUCKET}/corpora/x", {}, neutral, endpoint=endpoint),
            "outside": simulation(f"{BUCKET}/private/x", {}, neutral, endpoint=endpoint),
        }
    )
    assert results["inside"].decision == ALLOWED
    assert results["outside"].decision == IMPLICITLY_DENIED
    assert results["outside"].analyses["endpoint"].result == IMPLICITLY_DENIED


def test_explicit_deny_names_its_statement() -> None:
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            *DELEGATION["Statement"],
            {
                "Sid": "DenyRequestsWithoutTls",
                "Effect": "Deny",
                "Principal": {"AWS": "*"},
                "Action": "s3:*",
                "Resource": f"{BUCKET}/*",
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            },
        ],
    }
    result = Engine().run_batch({"no-tls": simulation(f"{BUCKET}/x", {"aws:SecureTransport": "false"}, policy)})[
        "no-tls"
    ]
    assert result.decision == EXPLICITLY_DENIED
    assert [s.sid for s in result.analyses["resource"].deny] == ["DenyRequestsWithoutTls"]


def test_invalid_request_names_the_simulation() -> None:
    with pytest.raises(EngineError, match=r"simulation bad-action: rejected by the engine: .*invalid\.action"):
        Engine().run_batch({"bad-action": simulation(f"{BUCKET}/x", {}, DELEGATION, action="s3:GetObjekt")})


def test_misspelled_action_in_a_policy_is_silent_but_the_lint_finds_it() -> None:
    typo = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:GetObjekt", "Resource": "*"}]}
    result = Engine().run_batch({"typo": simulation(f"{BUCKET}/x", {}, DELEGATION, identity=typo)})["typo"]
    assert result.decision == IMPLICITLY_DENIED, "the engine accepts the policy and simply never matches"
    lint = Engine().lint(
        ["s3:GetObjekt", "s3:GetObject", "s3:List*", "kms:*"], ["aws:PrincipalOrgIDs", "kms:ViaService"]
    )
    assert lint.unknown_actions == ("s3:GetObjekt",)
    assert lint.unknown_condition_keys == ("aws:PrincipalOrgIDs",)


def test_every_action_and_condition_key_of_the_deployment_is_known(world: PolicyWorld, engine: Engine) -> None:
    actions, keys = policy_actions_and_keys(list(world.policies.documents.values()))
    assert {"s3:GetObject", "kms:Decrypt"} <= actions and "aws:PrincipalOrgID" in keys
    lint = engine.lint(actions, keys)
    assert lint.unknown_actions == () and lint.unknown_condition_keys == ()
