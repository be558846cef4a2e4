"""The policy world of the default deployment, built once per session from the real synth."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from policies.verify.extract import ExtractedPolicies, extract_from_assembly
from policies.verify.harness.engine import Engine
from policies.verify.harness.model import PolicySet
from policies.verify.matrix import Case, CaseResult, MatrixContext, build_cases, evaluate, matrix_context, policy_set
from policies.verify.mutations import MutationReport
from policies.verify.mutations import run as run_mutations
from spec import DeploymentSpec
from tests.stacks.conftest import Assembly


@dataclass
class PolicyWorld:
    spec: DeploymentSpec
    extracted: ExtractedPolicies
    policies: PolicySet
    context: MatrixContext
    cases: list[Case]


@pytest.fixture(scope="session")
def engine() -> Engine:
    """One engine (and result cache) for every policy test of the session."""
    return Engine()


@pytest.fixture(scope="session")
def world(default_assembly: Assembly) -> PolicyWorld:
    spec = default_assembly.spec
    extracted = extract_from_assembly(default_assembly.out, spec)
    context = matrix_context(spec, extracted)
    return PolicyWorld(spec, extracted, policy_set(extracted, spec), context, build_cases(spec, context))


@pytest.fixture(scope="session")
def matrix(world: PolicyWorld, engine: Engine) -> list[CaseResult]:
    return evaluate(world.cases, world.policies, world.context, engine)


@pytest.fixture(scope="session")
def mutation_report(world: PolicyWorld, engine: Engine) -> MutationReport:
    report, _ = run_mutations(world.cases, world.policies, world.context, engine)
    return report
