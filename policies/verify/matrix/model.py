"""The matrix's vocabulary: a Case (a request and the layers expected to deny it), the denial helpers, the
context the cases are built in and a CaseResult."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from policies.verify.harness.engine import ALLOWED, EXPLICITLY_DENIED, IMPLICITLY_DENIED, Decision
from policies.verify.harness.layers import (
    LAYER_ORDER,
    LayerOutcome,
)
from policies.verify.harness.model import (
    PolicySet,
    Request,
)

OUTSIDE_ACCOUNT = "333333333333"  # an account outside the organization
OTHER_ORG_ACCOUNT = "444444444444"
OTHER_ORG_ID = "o-zz9yx8wv7u6t"

Denials = Mapping[str, frozenset[str]]  # layer -> its explicit Deny statements (empty: implicit deny)


def merge(*parts: Denials) -> dict[str, frozenset[str]]:
    """Denials of several reasons together: per layer, an explicit Deny outweighs an implicit one."""
    merged: dict[str, frozenset[str]] = {}
    for part in parts:
        for layer, sids in part.items():
            merged[layer] = merged.get(layer, frozenset()) | sids
    return merged


def implicit(*layers: str) -> dict[str, frozenset[str]]:
    return {layer: frozenset() for layer in layers}


def explicit(layer: str, *sids: str) -> dict[str, frozenset[str]]:
    return {layer: frozenset(sids)}


@dataclass(frozen=True)
class Case:
    case_id: str
    group: str  # "grant": generated from the datasets; "perimeter": fixed threats; "platform": endpoint needs
    title: str
    request: Request
    denials: Denials  # empty: expected to be allowed
    variant: Callable[[PolicySet], PolicySet] | None = field(default=None, compare=False)
    why: str = ""  # the invariant the case holds the design to

    @property
    def expect_allowed(self) -> bool:
        return not self.denials


@dataclass(frozen=True)
class MatrixContext:
    """What the cases need beyond the spec: the dataset key S3 uses on the caller's behalf, and the ARNs that exist
    only once CloudFormation made the resource (as the extraction resolves them)."""

    key_arn: str
    key_aliases: tuple[str, ...]
    via_service: str
    metrics_workspace_arn: str | None = None  # the Prometheus workspace; None without templates that hold one


@dataclass(frozen=True)
class CaseResult:
    case: Case
    layers: tuple[LayerOutcome, ...]

    @property
    def decision(self) -> Decision:
        decisions = {layer.decision for layer in self.layers}
        if EXPLICITLY_DENIED in decisions:
            return EXPLICITLY_DENIED
        return IMPLICITLY_DENIED if IMPLICITLY_DENIED in decisions else ALLOWED

    @property
    def denials(self) -> dict[str, frozenset[str]]:
        return {layer.layer: denial for layer in self.layers if (denial := layer.denial) is not None}

    def mismatches(self) -> list[str]:
        expected, actual = dict(self.case.denials), self.denials
        problems = []
        if (self.decision == ALLOWED) != self.case.expect_allowed:
            problems.append(f"decision {self.decision}, expected {'Allowed' if self.case.expect_allowed else 'denied'}")
        evaluated = {layer.layer for layer in self.layers}
        for layer in LAYER_ORDER:
            if layer in evaluated and expected.get(layer) != actual.get(layer):
                problems.append(f"{layer}: {_show(actual.get(layer))}, expected {_show(expected.get(layer))}")
        for layer in sorted(set(expected) - evaluated):
            problems.append(f"{layer}: expected to deny but not evaluated")
        return problems

    @property
    def as_expected(self) -> bool:
        return not self.mismatches()


def _show(denial: frozenset[str] | None) -> str:
    if denial is None:
        return "allows"
    return f"denies explicitly ({', '.join(sorted(denial))})" if denial else "denies implicitly"
