"""Whether the registry of principals (policies/principals.py) is complete: every role the synthesized templates
create is claimed by an entry (or is one of CDK's own service roles), every created entry's role is in its stack with
its trust and only the policies it declares, and the matrix has a case allowing and one denying each."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from policies.principals import PRINCIPALS, PrincipalEntry, always, service_trust
from policies.verify.extract import from_builders, load_templates, stack_environments
from policies.verify.matrix import build_cases, matrix_context
from policies.verify.principal_coverage import (
    principals_without_cases,
    roles_the_registry_does_not_match,
    undeclared_policies,
)
from spec import parse_spec
from tests.policies.conftest import PolicyWorld
from tests.policies.verify.synthesized import evaluated_cases
from tests.stacks.conftest import Assembly

# A principal added to the registry and nowhere else: no construct creates it, no case covers it.
AUDITOR = PrincipalEntry(
    key="auditor",
    stack="identity",
    description="reads the account's costs (a registry test's stand-in)",
    created=always,
    trust=lambda spec: service_trust("ec2.amazonaws.com"),
    exact_policies={},
)


def _templates(default_assembly: Assembly) -> dict[str, dict[str, Any]]:
    return copy.deepcopy(load_templates(default_assembly.out, default_assembly.spec))


def test_every_role_of_the_templates_is_a_registered_principal(default_assembly: Assembly) -> None:
    spec, environments = default_assembly.spec, stack_environments(default_assembly.out)
    assert roles_the_registry_does_not_match(_templates(default_assembly), spec, environments) == []


def test_a_role_no_entry_claims_is_named(default_assembly: Assembly) -> None:
    spec, environments = default_assembly.spec, stack_environments(default_assembly.out)
    templates = _templates(default_assembly)
    templates["identity"]["Resources"]["AuditorRole"] = {
        "Type": "AWS::IAM::Role",
        "Properties": {"RoleName": "llm-demo-auditor", "AssumeRolePolicyDocument": service_trust("ec2.amazonaws.com")},
    }
    assert roles_the_registry_does_not_match(templates, spec, environments) == [
        "llm-demo-identity/AuditorRole (llm-demo-auditor): no entry in policies/principals.py claims it"
    ]


def test_an_entry_without_its_role_or_with_another_trust_is_named(default_assembly: Assembly) -> None:
    spec, environments = default_assembly.spec, stack_environments(default_assembly.out)
    templates = _templates(default_assembly)
    for resource in templates["identity"]["Resources"].values():
        if resource["Properties"].get("RoleName") == "llm-demo-notebook":
            resource["Properties"]["AssumeRolePolicyDocument"] = service_trust("ec2.amazonaws.com")
    assert roles_the_registry_does_not_match(templates, spec, environments, (*PRINCIPALS, AUDITOR)) == [
        "llm-demo-identity/NotebookRoleD242070B (llm-demo-notebook): its trust differs from the entry's",
        "auditor: policies/principals.py has it, but llm-demo-identity creates no role llm-demo-auditor",
    ]


def test_every_policy_on_a_principal_is_declared_by_its_entry(world: PolicyWorld) -> None:
    assert undeclared_policies(world.extracted, world.spec) == []
    head_node = world.extracted.roles["llm-demo-head-node"]
    grown = {**head_node.inline, "debugging": {"Version": "2012-10-17", "Statement": []}}
    roles = {**world.extracted.roles, head_node.name: type(head_node)(head_node.name, grown, ())}
    extracted = type(world.extracted)(**{**world.extracted.__dict__, "roles": roles})
    assert undeclared_policies(extracted, world.spec) == [
        "llm-demo-head-node: policy 'debugging' is attached but its entry in policies/principals.py does not name it"
    ]


def test_every_principal_has_a_case_allowing_it_and_one_denying_it(world: PolicyWorld) -> None:
    assert principals_without_cases(world.cases, world.spec) == []


def test_a_principal_without_cases_is_named(world: PolicyWorld) -> None:
    spec = world.spec
    cases = build_cases(spec, matrix_context(spec, from_builders(spec)))
    assert principals_without_cases(cases, spec, (*PRINCIPALS, AUDITOR)) == [
        "auditor: no case of the matrix allows it",
        "auditor: no case of the matrix denies it",
    ]


def test_the_grafana_role_is_a_principal_that_queries_its_workspace_and_reaches_no_dataset(tmp_path: Path) -> None:
    """The Grafana role lives in the observability stack, which no other principal uses: its entry makes the
    coverage checks read that stack, and its cases hold it to querying exactly this cluster's workspace."""
    from tests.cluster.conftest import with_cluster

    doc = with_cluster(lambda c: c.__setitem__("observability", {"managed_grafana": True}))
    results = evaluated_cases(doc, tmp_path, lambda case, spec: case.group == "grafana")
    spec = parse_spec(doc)
    allowed = sorted(r.case.case_id for r in results if r.case.expect_allowed)
    assert allowed == ["grafana/GetLabels", "grafana/GetMetricMetadata", "grafana/GetSeries", "grafana/QueryMetrics"]
    assert len(results) == len(allowed) + 2 + len(spec.data.datasets)
