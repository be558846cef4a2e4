"""Whether the registry of principals (policies/principals.py) and the deployment agree: what a principal added in
one place but forgotten in another would leave behind. Each check returns one line per problem (empty: none)."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence

from policies.principals import PRINCIPALS, PrincipalEntry, created_principals
from policies.verify.extract import ExtractedPolicies, Resolver, StackEnvironment, Template
from policies.verify.matrix.model import Case
from spec import DeploymentSpec

# Roles CDK makes for its own constructs, which only an AWS service assumes: construct path (after the stack) -> what.
CDK_SERVICE_ROLES: dict[str, str] = {
    "Network/FlowLog/IAMRole/Resource": "the VPC flow log's delivery role (vpc-flow-logs.amazonaws.com)",
    "Custom::VpcRestrictDefaultSGCustomResourceProvider/Role": "CDK's Lambda that empties the default security group",
}


def roles_the_registry_does_not_match(
    templates: Mapping[str, Template],
    spec: DeploymentSpec,
    environments: Mapping[str, StackEnvironment],
    entries: tuple[PrincipalEntry, ...] = PRINCIPALS,
) -> list[str]:
    """Roles of the templates no created entry claims (CDK's service roles aside), roles whose trust differs from
    their entry's, and created entries whose stack creates no such role."""
    created = {entry.role_name(spec): entry for entry in created_principals(spec, entries)}
    problems, found = [], set()
    for key, template in templates.items():
        stack = spec.stack_names[key]
        resolver = Resolver(template, environments[stack])
        for logical, resource in resolver.resources.items():
            if resource["Type"] != "AWS::IAM::Role":
                continue
            path = str(resource.get("Metadata", {}).get("aws:cdk:path", "")).removeprefix(f"{stack}/")
            name = resolver.physical_name(logical)
            entry = created.get(name)
            if entry is None or entry.stack != key:
                if path not in CDK_SERVICE_ROLES:
                    problems.append(f"{stack}/{logical} ({name}): no entry in policies/principals.py claims it")
                continue
            found.add(name)
            trust = resolver.resolve(resource["Properties"].get("AssumeRolePolicyDocument"), logical)
            if trust != entry.trust(spec):
                problems.append(f"{stack}/{logical} ({name}): its trust differs from the entry's")
    problems += [
        f"{entry.key}: policies/principals.py has it, but {spec.stack_names[entry.stack]} creates no role {name}"
        for name, entry in created.items()
        if name not in found
    ]
    return problems


def undeclared_policies(
    extracted: ExtractedPolicies, spec: DeploymentSpec, entries: tuple[PrincipalEntry, ...] = PRINCIPALS
) -> list[str]:
    """Inline policies on a principal's role that its entry names neither as exact nor as attached elsewhere."""
    problems = []
    for entry in created_principals(spec, entries):
        role = extracted.roles.get(entry.role_name(spec))
        if role is None:  # roles_the_registry_does_not_match names it
            continue
        for policy in role.inline:
            declared = policy in entry.exact_policies or any(
                fnmatch.fnmatchcase(policy, pattern) for pattern in entry.attached_elsewhere
            )
            if not declared:
                problems.append(
                    f"{role.name}: policy {policy!r} is attached but its entry in policies/principals.py does not "
                    "name it"
                )
    return problems


def principals_without_cases(
    cases: Sequence[Case], spec: DeploymentSpec, entries: tuple[PrincipalEntry, ...] = PRINCIPALS
) -> list[str]:
    """Created entries that no case of the matrix allows, or none denies: their policies would go untested."""
    problems = []
    for entry in created_principals(spec, entries):
        own = [case for case in cases if case.request.principal.role == entry.role_name(spec)]
        if not any(case.expect_allowed for case in own):
            problems.append(f"{entry.key}: no case of the matrix allows it")
        if all(case.expect_allowed for case in own):
            problems.append(f"{entry.key}: no case of the matrix denies it")
    return problems
