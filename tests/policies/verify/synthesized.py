"""A spec variant synthesized in process and held to the principal checks, then its access-matrix cases evaluated:
what each variant's principal test (a Grafana role, per-queue roles) runs before its own assertions."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from policies.verify.extract import extract_policies, stack_environments
from policies.verify.harness.engine import Engine
from policies.verify.matrix import build_cases, evaluate, matrix_context, policy_set
from policies.verify.principal_coverage import (
    principals_without_cases,
    roles_the_registry_does_not_match,
    undeclared_policies,
)
from spec import parse_spec
from spec.model import DeploymentSpec


def evaluated_cases(doc: dict[str, Any], tmp_path: Path, chosen: Callable[[Any, DeploymentSpec], bool]) -> list[Any]:
    """Synthesize `doc`; every role is a registered principal with only its declared policies and has cases; the
    results of the cases `chosen` picks, each checked to come out as expected."""
    from tests.stacks.test_variants import synth

    templates, _ = synth(doc, tmp_path)
    spec, environments = parse_spec(doc), stack_environments(tmp_path)
    assert roles_the_registry_does_not_match(templates, spec, environments) == []
    extracted = extract_policies(templates, spec, environments)
    assert undeclared_policies(extracted, spec) == []
    context = matrix_context(spec, extracted)
    cases = build_cases(spec, context)
    assert principals_without_cases(cases, spec) == []
    picked = [case for case in cases if chosen(case, spec)]
    results = evaluate(picked, policy_set(extracted, spec), context, Engine())
    assert [f"{r.case.case_id}: {'; '.join(r.mismatches())}" for r in results if not r.as_expected] == []
    return results
