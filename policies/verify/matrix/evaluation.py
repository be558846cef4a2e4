"""Evaluating cases: one engine simulation per layer, batched, and the result of each case."""

from __future__ import annotations

from collections.abc import Sequence

from policies.verify.harness.engine import Engine
from policies.verify.harness.layers import (
    Layer,
    layers_for,
    outcome,
)
from policies.verify.harness.model import (
    PolicySet,
)
from policies.verify.matrix.model import Case, CaseResult, MatrixContext


def plan(cases: Sequence[Case], policies: PolicySet, context: MatrixContext) -> list[list[Layer]]:
    planned = []
    for case in cases:
        effective = case.variant(policies) if case.variant else policies
        planned.append(layers_for(case.request, effective, context.key_arn, context.key_aliases, context.via_service))
    return planned


def _changed_documents(policies: PolicySet, baseline: PolicySet) -> set[str]:
    ids = set(policies.documents) | set(baseline.documents)
    return {pid for pid in ids if policies.documents.get(pid) is not baseline.documents.get(pid)}


def evaluate_many(
    cases: Sequence[Case], policy_sets: Sequence[PolicySet], context: MatrixContext, engine: Engine
) -> list[list[CaseResult]]:
    """Every case under every policy set, in one engine batch.

    The first set is the baseline; a case is planned again under a later set only if one of its
    layers reads a document that set replaced, so a mutant costs only the simulations it changes.
    """
    baseline = plan(cases, policy_sets[0], context)
    plans = [baseline]
    for policies in policy_sets[1:]:
        changed = _changed_documents(policies, policy_sets[0])
        if not changed:
            plans.append(baseline)
            continue
        planned = []
        for case, layers in zip(cases, baseline, strict=True):
            touched = any(pid in changed for layer in layers for pid in layer.policy_ids)
            planned.append(plan([case], policies, context)[0] if touched else layers)
        plans.append(planned)
    simulations = {layer.key: layer.simulation for planned in plans for layers in planned for layer in layers}
    results = engine.run_keyed(simulations)
    return [
        [
            CaseResult(case, tuple(outcome(layer, results[layer.key]) for layer in layers))
            for case, layers in zip(cases, planned, strict=True)
        ]
        for planned in plans
    ]


def evaluate(cases: Sequence[Case], policies: PolicySet, context: MatrixContext, engine: Engine) -> list[CaseResult]:
    return evaluate_many(cases, [policies], context, engine)[0]
