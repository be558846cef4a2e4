"""The principal registry (policies/principals.py): one entry per role this repo creates, with what the verification
reads from it. Whether the templates and the matrix agree with it: tests/policies/verify/test_principal_coverage.py."""

from __future__ import annotations

import pytest

from policies.identity import identity_policy
from policies.operator import operator_session_policy, operator_trust_policy
from policies.principals import PRINCIPALS, builder_name, created_principals, principal, service_trust
from spec import BUILTIN_ROLES, DeploymentSpec, load_spec


@pytest.fixture(scope="module")
def spec() -> DeploymentSpec:
    return load_spec()


def test_each_principal_is_named_once() -> None:
    keys = [entry.key for entry in PRINCIPALS]
    assert len(keys) == len(set(keys))


def test_the_default_deployment_creates_every_principal(spec: DeploymentSpec) -> None:
    assert [entry.key for entry in created_principals(spec)] == ["cluster-node", "head-node", "notebook", "operator"]


def test_optional_principals_follow_their_spec_switch(spec: DeploymentSpec) -> None:
    bare = spec.model_copy(
        update={
            "notebook": spec.notebook.model_copy(update={"enabled": False}),
            "perimeter": spec.perimeter.model_copy(update={"operator_roles": []}),
        }
    )
    assert [entry.key for entry in created_principals(bare)] == ["cluster-node", "head-node"]


def test_an_entry_builds_its_documents_from_the_policy_modules(spec: DeploymentSpec) -> None:
    operator = principal("operator")
    assert operator.role_name(spec) == "llm-demo-operator"
    assert operator.role_arn(spec) == spec.operator_role_arn
    assert operator.trust(spec) == operator_trust_policy(spec)
    assert operator.exact_documents(spec) == {"sessions": operator_session_policy(spec)}
    assert principal("notebook").exact_documents(spec) == {"datasets": identity_policy(spec, "notebook")}
    # A builder that has nothing for this role (the notebook reads no artifacts) attaches nothing.
    assert set(principal("cluster-node").exact_documents(spec)) <= {"datasets", "artifacts"}


def test_builders_are_named_as_a_reader_finds_them() -> None:
    assert builder_name(principal("operator").exact_policies["sessions"]) == "policies.operator.operator_session_policy"
    assert builder_name(principal("head-node").exact_policies["datasets"]) == "policies.identity.identity_policy"


def test_a_service_role_trusts_its_service_alone() -> None:
    (statement,) = service_trust("ec2.amazonaws.com")["Statement"]
    assert statement == {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}}


def test_an_unknown_principal_is_named() -> None:
    with pytest.raises(KeyError, match=r"no principal 'auditor' in policies/principals\.py"):
        principal("auditor")


def test_every_role_a_dataset_may_name_has_an_entry() -> None:
    assert set(BUILTIN_ROLES) <= {entry.key for entry in PRINCIPALS}
