"""The harness's own decisions on the keys the engine cannot see on bucket resources: unit-tested, and
checked against the engine where the engine does see them (on access point resources)."""

from __future__ import annotations

from typing import Any

import pytest

from policies.verify.harness.conditions import (
    NEVER_MATCHING_RESOURCE,
    UndecidableCondition,
    condition_holds,
    decide_policy,
    expected_ignored_keys,
    names_action,
)
from policies.verify.harness.engine import ALLOWED, Engine

OWN = "222222222222"
AP = f"arn:aws:s3:us-east-1:{OWN}:accesspoint/llm-demo-pretraining"
OTHER_AP = "arn:aws:s3:us-east-1:333333333333:accesspoint/shadow"
BLIND = frozenset({"s3:dataaccesspointaccount", "s3:dataaccesspointarn", "s3:accesspointnetworkorigin"})

# (operator, key, values, context) -> whether the condition holds, by IAM's rules.
CONDITIONS: list[tuple[str, str, Any, dict[str, str], bool]] = [
    ("StringEquals", "s3:DataAccessPointAccount", OWN, {"s3:DataAccessPointAccount": OWN}, True),
    ("StringEquals", "s3:DataAccessPointAccount", OWN, {"s3:DataAccessPointAccount": "333333333333"}, False),
    ("StringEquals", "s3:DataAccessPointAccount", OWN, {}, False),
    (
        "StringEquals",
        "s3:DataAccessPointAccount",
        [OWN, "333333333333"],
        {"s3:DataAccessPointAccount": "333333333333"},
        True,
    ),
    ("StringNotEquals", "s3:AccessPointNetworkOrigin", "VPC", {"s3:AccessPointNetworkOrigin": "VPC"}, False),
    ("StringNotEquals", "s3:AccessPointNetworkOrigin", "VPC", {"s3:AccessPointNetworkOrigin": "Internet"}, True),
    ("StringNotEquals", "s3:AccessPointNetworkOrigin", "VPC", {}, True),
    ("StringEquals", "s3:AccessPointNetworkOrigin", "Vpc", {"s3:AccessPointNetworkOrigin": "VPC"}, False),
    ("StringEqualsIgnoreCase", "s3:AccessPointNetworkOrigin", "vpc", {"s3:AccessPointNetworkOrigin": "VPC"}, True),
    ("StringEqualsIfExists", "s3:DataAccessPointAccount", OWN, {}, True),
    ("StringEqualsIfExists", "s3:DataAccessPointAccount", OWN, {"s3:DataAccessPointAccount": "333333333333"}, False),
    ("StringLike", "s3:DataAccessPointArn", f"arn:aws:s3:*:{OWN}:accesspoint/*", {"s3:DataAccessPointArn": AP}, True),
    (
        "StringLike",
        "s3:DataAccessPointArn",
        f"arn:aws:s3:*:{OWN}:accesspoint/*",
        {"s3:DataAccessPointArn": OTHER_AP},
        False,
    ),
    ("StringNotLike", "s3:DataAccessPointArn", "*:333333333333:*", {"s3:DataAccessPointArn": AP}, True),
    ("ArnEquals", "s3:DataAccessPointArn", AP, {"s3:DataAccessPointArn": AP}, True),
    (
        "ArnLike",
        "s3:DataAccessPointArn",
        f"arn:aws:s3:us-east-1:{OWN}:accesspoint/llm-demo-*",
        {"s3:DataAccessPointArn": AP},
        True,
    ),
    (
        "ArnLike",
        "s3:DataAccessPointArn",
        "arn:aws:s3:us-east-1:*:accesspoint/shadow",
        {"s3:DataAccessPointArn": AP},
        False,
    ),
    ("ArnNotLike", "s3:DataAccessPointArn", "arn:aws:s3:*:333333333333:*", {"s3:DataAccessPointArn": AP}, True),
    ("ArnNotLike", "s3:DataAccessPointArn", "arn:aws:s3:*:333333333333:*", {"s3:DataAccessPointArn": OTHER_AP}, False),
    ("Null", "s3:DataAccessPointArn", "true", {}, True),
    ("Null", "s3:DataAccessPointArn", "true", {"s3:DataAccessPointArn": AP}, False),
    ("Null", "s3:DataAccessPointArn", "false", {"s3:DataAccessPointArn": AP}, True),
]


@pytest.mark.parametrize(("operator", "key", "values", "context", "holds"), CONDITIONS)
def test_condition_holds_by_iam_rules(
    operator: str, key: str, values: Any, context: dict[str, str], holds: bool
) -> None:
    assert condition_holds(operator, key, values, context) is holds


def test_condition_keys_are_case_insensitive_and_values_are_not() -> None:
    assert condition_holds("stringequals", "S3:DATAACCESSPOINTACCOUNT", OWN, {"s3:DataAccessPointAccount": OWN})
    assert not condition_holds(
        "StringEquals", "s3:AccessPointNetworkOrigin", "vpc", {"s3:AccessPointNetworkOrigin": "VPC"}
    )


def test_the_harness_agrees_with_the_engine_where_the_engine_can_see() -> None:
    """Every decision above, asked of the engine on an access point object, where it does evaluate
    these keys: one Allow statement per condition, granted exactly when the condition holds."""
    simulations = {}
    for index, (operator, key, values, context, _) in enumerate(CONDITIONS):
        policy = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"AWS": "arn:aws:iam::111111111111:root"},
                    "Action": "s3:GetObject",
                    "Resource": f"{AP}/object/*",
                    "Condition": {operator: {key: values}},
                }
            ],
        }
        simulations[str(index)] = {
            "request": {
                "principal": "arn:aws:iam::111111111111:role/reader",
                "action": "s3:GetObject",
                "resource": {"resource": f"{AP}/object/corpora/x", "accountId": OWN},
                "contextVariables": context,
            },
            "identityPolicies": [
                {
                    "name": "all",
                    "policy": {
                        "Version": "2012-10-17",
                        "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
                    },
                }
            ],
            "serviceControlPolicies": [],
            "resourceControlPolicies": [],
            "resourcePolicy": policy,
        }
    results = Engine().run_batch(simulations)
    for index, (operator, key, values, context, holds) in enumerate(CONDITIONS):
        result = results[str(index)]
        assert result.ignored_context_keys == frozenset(), (operator, key)
        assert (result.decision == ALLOWED) is holds, f"{operator} {key} {values} with {context}"
        assert condition_holds(operator, key, values, context) is holds


def test_unsupported_conditions_are_refused_not_guessed() -> None:
    with pytest.raises(UndecidableCondition, match="set operators"):
        condition_holds("ForAnyValue:StringEquals", "s3:DataAccessPointAccount", OWN, {})
    with pytest.raises(UndecidableCondition, match="policy variables"):
        condition_holds("StringEquals", "s3:DataAccessPointAccount", "${aws:PrincipalAccount}", {})
    with pytest.raises(UndecidableCondition, match="operator not supported"):
        condition_holds("NumericEquals", "s3:DataAccessPointAccount", "1", {"s3:DataAccessPointAccount": "1"})


def _bucket_policy() -> dict[str, Any]:
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "DenyRequestsWithoutTls",
                "Effect": "Deny",
                "Principal": {"AWS": "*"},
                "Action": "s3:*",
                "Resource": ["arn:aws:s3:::b", "arn:aws:s3:::b/*"],
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            },
            {
                "Effect": "Allow",
                "Principal": {"AWS": "*"},
                "Action": ["s3:GetObject", "s3:PutObject"],
                "Resource": "arn:aws:s3:::b/*",
                "Condition": {"StringEquals": {"s3:DataAccessPointAccount": OWN, "aws:PrincipalOrgID": "o-a1b2c3d4e5"}},
            },
        ],
    }


def test_decide_policy_removes_conditions_that_hold_and_keeps_the_rest() -> None:
    decided_policy, decided = decide_policy(_bucket_policy(), {"s3:DataAccessPointAccount": OWN}, BLIND, "s3:GetObject")
    delegation = decided_policy["Statement"][1]
    assert delegation["Condition"] == {"StringEquals": {"aws:PrincipalOrgID": "o-a1b2c3d4e5"}}
    assert decided_policy["Statement"][0] == _bucket_policy()["Statement"][0], "other keys stay for the engine"
    assert [(d.sid, d.key, d.holds, d.names_action) for d in decided] == [
        ("Statement2", "s3:DataAccessPointAccount", True, True)
    ]


def test_decide_policy_neutralizes_a_statement_whose_condition_fails_keeping_its_place() -> None:
    context = {"s3:DataAccessPointAccount": "333333333333"}
    decided_policy, decided = decide_policy(_bucket_policy(), context, BLIND, "s3:ListBucket")
    statements = decided_policy["Statement"]
    assert len(statements) == 2, "indexes (and so '#n' labels) must not move"
    assert statements[1]["Resource"] == NEVER_MATCHING_RESOURCE and "Condition" not in statements[1]
    assert statements[1]["Effect"] == "Allow" and statements[1]["Action"] == ["s3:GetObject", "s3:PutObject"]
    assert not decided[0].holds and not decided[0].names_action
    assert "fails (request: 333333333333)" in decided[0].describe()


def test_decide_policy_leaves_a_policy_alone_without_blind_keys() -> None:
    policy = _bucket_policy()
    decided_policy, decided = decide_policy(policy, {}, frozenset())
    assert decided_policy == policy and decided == ()


def test_names_action_follows_wildcards_and_not_action() -> None:
    assert names_action({"Action": "s3:*"}, "s3:GetObject")
    assert names_action({"Action": ["s3:Get*"]}, "s3:getobject")
    assert not names_action({"Action": ["s3:Put*"]}, "s3:GetObject")
    assert not names_action({"NotAction": "s3:GetObject"}, "s3:GetObject")


def test_expected_ignored_keys_only_on_bucket_resources() -> None:
    context = {"s3:DataAccessPointAccount": OWN, "aws:SecureTransport": "true"}
    assert expected_ignored_keys("arn:aws:s3:::b/key", context) == {"s3:DataAccessPointAccount"}
    assert expected_ignored_keys("arn:aws:s3:::b", context) == {"s3:DataAccessPointAccount"}
    assert expected_ignored_keys(f"{AP}/object/key", context) == frozenset()
