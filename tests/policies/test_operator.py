"""The operator role's documents (policies/operator.py): sessions on this cluster's nodes, the caller's own sessions,
the describe calls; trust in the compute account alone; nothing of S3 or KMS."""

from __future__ import annotations

from typing import Any

import pytest

from policies.cluster_nodes import CLUSTER_TAG
from policies.operator import operator_session_policy, operator_trust_policy
from spec import DeploymentSpec, load_spec


@pytest.fixture(scope="module")
def spec() -> DeploymentSpec:
    return load_spec()


def _actions(document: dict[str, Any]) -> set[str]:
    found: set[str] = set()
    for statement in document["Statement"]:
        action = statement["Action"]
        found |= {action} if isinstance(action, str) else set(action)
    return found


def test_sessions_start_only_on_instances_tagged_with_this_cluster(spec: DeploymentSpec) -> None:
    statements = {s["Sid"]: s for s in operator_session_policy(spec)["Statement"]}
    (nodes,) = [s for s in statements.values() if ":instance/" in str(s["Resource"])]
    assert nodes["Action"] == "ssm:StartSession"
    assert nodes["Condition"] == {"StringEquals": {f"ssm:resourceTag/{CLUSTER_TAG}": spec.name}}
    own = statements["EndOrResumeOwnSessions"]
    assert own["Condition"] == {"StringLike": {"ssm:resourceTag/aws:ssmmessages:session-id": "${aws:userid}"}}


def test_the_operator_gets_no_data_actions(spec: DeploymentSpec) -> None:
    actions = _actions(operator_session_policy(spec))
    assert not {a for a in actions if a.split(":")[0] in ("s3", "kms", "iam", "sts")}
    assert not {a for a in actions if "*" in a}


def test_only_the_compute_account_may_assume_it(spec: DeploymentSpec) -> None:
    (trust,) = operator_trust_policy(spec)["Statement"]
    assert trust["Principal"] == {"AWS": f"arn:aws:iam::{spec.accounts.compute}:root"}
    assert trust["Action"] == "sts:AssumeRole" and trust["Effect"] == "Allow"
