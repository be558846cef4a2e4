"""The access matrix: every (principal, action, resource, context) the design promises to allow or
to deny, generated from the spec, each with the layers expected to deny it.

Grant cases come from the datasets (every reader and writer: what they may do, and the nearest
things they may not). Perimeter cases are fixed threats: other accounts, other organizations,
no TLS, Internet origin, exfiltration through the endpoint, keys used outside S3. A case holds
when the overall decision AND the set of denying layers (with their explicit Deny statements)
are exactly as expected, so weakening one layer shows even where another still denies.
"""

from __future__ import annotations

from policies.verify.matrix.cases import build_cases, implied_policy_ids
from policies.verify.matrix.cases.common import ALL_S3_LAYERS
from policies.verify.matrix.cases.datasets import dataset_cases, dataset_perimeter_cases
from policies.verify.matrix.cases.guardrails import guardrail_cases
from policies.verify.matrix.cases.interface_endpoints import interface_endpoint_cases
from policies.verify.matrix.cases.keys import key_cases
from policies.verify.matrix.cases.perimeter import perimeter_cases
from policies.verify.matrix.cases.platform import endpoint_without_access_points, platform_cases
from policies.verify.matrix.cases.side_channels import SSE, SSE_C, SSE_KEY, access_point_pinning_cases, encryption_cases
from policies.verify.matrix.cases.wheelhouse import artifact_cases
from policies.verify.matrix.evaluation import evaluate, evaluate_many, plan
from policies.verify.matrix.model import (
    OTHER_ORG_ACCOUNT,
    OTHER_ORG_ID,
    OUTSIDE_ACCOUNT,
    Case,
    CaseResult,
    Denials,
    MatrixContext,
    explicit,
    implicit,
    merge,
)
from policies.verify.matrix.policy_set import load_control_policies, matrix_context, policy_set

__all__ = [
    "ALL_S3_LAYERS",
    "OTHER_ORG_ACCOUNT",
    "OTHER_ORG_ID",
    "OUTSIDE_ACCOUNT",
    "SSE",
    "SSE_C",
    "SSE_KEY",
    "Case",
    "CaseResult",
    "Denials",
    "MatrixContext",
    "access_point_pinning_cases",
    "artifact_cases",
    "build_cases",
    "dataset_cases",
    "dataset_perimeter_cases",
    "encryption_cases",
    "endpoint_without_access_points",
    "evaluate",
    "evaluate_many",
    "explicit",
    "guardrail_cases",
    "implicit",
    "implied_policy_ids",
    "interface_endpoint_cases",
    "key_cases",
    "load_control_policies",
    "matrix_context",
    "merge",
    "perimeter_cases",
    "plan",
    "platform_cases",
    "policy_set",
]
