"""Every case of a spec, family by family (one module each)."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from policies.guardrails import GUARDRAIL_POLICY_ID, guardrail_scps
from policies.principals import PRINCIPALS, PrincipalEntry
from policies.verify.matrix.cases.datasets import data_account_upload_cases, dataset_cases, dataset_perimeter_cases
from policies.verify.matrix.cases.guardrails import guardrail_cases
from policies.verify.matrix.cases.interface_endpoints import interface_endpoint_cases
from policies.verify.matrix.cases.keys import key_cases
from policies.verify.matrix.cases.perimeter import perimeter_cases
from policies.verify.matrix.cases.platform import platform_cases
from policies.verify.matrix.cases.side_channels import access_point_pinning_cases, encryption_cases
from policies.verify.matrix.cases.wheelhouse import adjusted, artifact_cases
from policies.verify.matrix.model import Case, MatrixContext
from spec import DeploymentSpec


def build_cases(
    spec: DeploymentSpec, context: MatrixContext, policies_present: frozenset[str] | None = None
) -> list[Case]:
    """Every case of `spec`. `policies_present`: the policy ids of the policy set (which interface endpoints
    have a policy, whether the guardrail SCP is evaluated); by default those the spec implies."""
    if policies_present is None:
        policies_present = implied_policy_ids(spec)
    cases = [
        *dataset_cases(spec),
        *data_account_upload_cases(spec),
        *encryption_cases(spec, context),
        *key_cases(spec, context),
        *dataset_perimeter_cases(spec),
        *perimeter_cases(spec),
        *access_point_pinning_cases(spec),
        *platform_cases(spec),
        *artifact_cases(spec),
        *interface_endpoint_cases(spec, policies_present),
        *guardrail_cases(spec, policies_present),
        *principal_cases(spec, context),
    ]
    cases = [adjusted(case, spec) for case in cases]
    ids = [case.case_id for case in cases]
    duplicates = {i for i in ids if ids.count(i) > 1}
    if duplicates:
        raise ValueError(f"duplicate case ids: {sorted(duplicates)}")
    return cases


def implied_policy_ids(spec: DeploymentSpec) -> frozenset[str]:
    """The interface endpoint and guardrail policy ids a deployment of `spec` has."""
    from policies.interface_endpoints import interface_endpoint_policy, wanted_interface_endpoints

    ids = {f"endpoint:{s}" for s in wanted_interface_endpoints(spec) if interface_endpoint_policy(spec, s) is not None}
    if guardrail_scps(spec) is not None:
        ids.add(GUARDRAIL_POLICY_ID)
    return frozenset(ids)


def principal_cases(spec: DeploymentSpec, context: MatrixContext) -> list[Case]:
    """The cases of each principal the spec creates that has a family of its own, in registry order."""
    owners = [entry for entry in PRINCIPALS if entry.matrix_cases and entry.created(spec)]
    return [case for entry in owners for case in case_family(entry)(spec, context)]


CaseFamily = Callable[[DeploymentSpec, MatrixContext], list[Case]]


def case_family(entry: PrincipalEntry) -> CaseFamily:
    """The function `entry.matrix_cases` names ("module:function"); the registry holds it by name because the
    policy builders may not import their verification."""
    module, _, function = entry.matrix_cases.partition(":")
    try:
        family: CaseFamily = getattr(importlib.import_module(module), function)
    except (ImportError, AttributeError) as error:
        raise ValueError(f"policies/principals.py {entry.key}: matrix_cases {entry.matrix_cases!r}: {error}") from None
    return family
