"""The operator role's documents (policies/operator.py): sessions on this cluster's nodes, the caller's own sessions,
the describe calls; trust in the compute account alone; nothing of S3 or KMS."""

from __future__ import annotations

from typing import Any

import pytest

from policies.cluster_nodes import CLUSTER_TAG
from policies.operator import (
    RUN_AS_TAG,
    SHELL_DOCUMENT,
    operator_session_policy,
    operator_trust_policy,
    run_as_document_content,
    run_as_document_name,
)
from spec import DeploymentSpec, load_spec, parse_spec
from spec.users import RESERVED_USERS
from tests.spec.test_users import USERS, people


@pytest.fixture(scope="module")
def spec() -> DeploymentSpec:
    """A one-person cluster: the default spec without its cluster.users."""
    return parse_spec(people([], []))


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


def _with_users() -> DeploymentSpec:
    """cluster.users declared: Session Manager runs each person's session as their own account (issue 43)."""
    return parse_spec(people(USERS))


def test_with_users_a_session_must_name_the_run_as_document_and_never_the_default_shell() -> None:
    spec = _with_users()
    statements = {s["Sid"]: s for s in operator_session_policy(spec)["Statement"]}
    documents = statements["SessionDocuments"]["Resource"]
    run_as = f"arn:aws:ssm:{spec.region}:{spec.accounts.compute}:document/{run_as_document_name(spec)}"
    assert run_as in documents
    assert not [d for d in documents if d.endswith(f"document/{SHELL_DOCUMENT}")]  # ssm-user's shell, sudo and all
    nodes = statements["SessionsOnThisClustersNodes"]
    # Without --document-name the default shell document is checked against the policy, which does not grant it.
    assert nodes["Condition"]["BoolIfExists"] == {"ssm:SessionDocumentAccessCheck": "true"}


def test_with_users_the_run_as_document_turns_run_as_on_and_fails_closed_without_a_tag() -> None:
    spec = _with_users()
    content = run_as_document_content(spec)
    assert content["sessionType"] == "Standard_Stream"
    assert content["inputs"]["runAsEnabled"] is True
    # A principal without SSMSessionRunAs gets an account no node has: the session fails, never ssm-user's shell.
    default_user = content["inputs"]["runAsDefaultUser"]
    assert spec.cluster is not None
    assert default_user in RESERVED_USERS and default_user not in {user.name for user in spec.cluster.users}


def test_with_users_a_caller_may_carry_only_its_own_run_as_tag_into_the_role() -> None:
    spec = _with_users()
    assume, tag = operator_trust_policy(spec)["Statement"]
    assert assume["Action"] == "sts:AssumeRole"
    assert tag["Action"] == "sts:TagSession" and tag["Principal"] == assume["Principal"]
    assert tag["Condition"] == {
        "StringEquals": {f"aws:RequestTag/{RUN_AS_TAG}": f"${{aws:PrincipalTag/{RUN_AS_TAG}}}"},
        "ForAllValues:StringEquals": {"aws:TagKeys": [RUN_AS_TAG]},
    }


def test_without_users_the_operator_keeps_the_default_shell(spec: DeploymentSpec) -> None:
    statements = {s["Sid"]: s for s in operator_session_policy(spec)["Statement"]}
    assert any(d.endswith(f"document/{SHELL_DOCUMENT}") for d in statements["SessionDocuments"]["Resource"])
    assert len(operator_trust_policy(spec)["Statement"]) == 1


def test_the_default_deployment_runs_every_session_as_its_callers_own_account() -> None:
    """The default spec declares users (README's connect step logs in as one's own account): its operator role starts
    sessions only with the run-as document, and ssm-user's default shell is out of reach."""
    default = load_spec()
    documents = {s["Sid"]: s for s in operator_session_policy(default)["Statement"]}["SessionDocuments"]["Resource"]
    assert documents[0] == "arn:aws:ssm:us-east-1:111111111111:document/llm-demo-RunShellAsUser"
    assert not [d for d in documents if d.endswith(f"document/{SHELL_DOCUMENT}")]
    assert [s["Sid"] for s in operator_trust_policy(default)["Statement"]] == [
        "ComputeAccountDecidesWho",
        "OwnRunAsTagOnly",
    ]
