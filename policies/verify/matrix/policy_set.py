"""The policy set the matrix evaluates, read from the synthesized templates (plus the control policies)."""

from __future__ import annotations

import json
from pathlib import Path

from policies.guardrails import GUARDRAIL_POLICY_ID, guardrail_scps
from policies.verify.extract import ExtractedPolicies
from policies.verify.harness.model import (
    PolicyDocument,
    PolicySet,
)
from policies.verify.matrix.model import MatrixContext
from spec import DeploymentSpec, SpecError, SpecProblem
from spec.errors import not_utf8_text


def load_control_policies(spec: DeploymentSpec, base: Path | None = None) -> dict[str, PolicyDocument]:
    """scp:<n> / rcp:<n> -> document, from the spec's perimeter (files are read relative to `base`)."""
    documents: dict[str, PolicyDocument] = {}
    for kind, sources in (("scp", spec.perimeter.scps), ("rcp", spec.perimeter.rcps)):
        for index, source in enumerate(sources):
            if isinstance(source, dict):
                documents[f"{kind}:{index}"] = source
                continue
            path = (base or Path.cwd()) / source
            field = f"perimeter.{kind}s[{index}]"
            try:
                documents[f"{kind}:{index}"] = json.loads(path.read_bytes().decode("utf-8"))
            except UnicodeDecodeError as error:
                raise SpecError([SpecProblem(field, not_utf8_text(error), source)]) from None
            except (OSError, json.JSONDecodeError, RecursionError) as error:
                raise SpecError([SpecProblem(field, f"cannot be read as JSON: {error}", source)]) from None
    return documents


def policy_set(extracted: ExtractedPolicies, spec: DeploymentSpec, base: Path | None = None) -> PolicySet:
    documents: dict[str, PolicyDocument] = {
        "bucket": extracted.bucket_policy,
        "endpoint": extracted.endpoint_policy,
    }
    for name, facts in extracted.access_points.items():
        documents[f"access-point:{name}"] = facts.policy
    role_arns: dict[str, str] = {}
    for role, policies in extracted.roles.items():
        role_arns[role] = f"arn:aws:iam::{spec.accounts.compute}:role/{role}"
        for policy_name, document in policies.inline.items():
            documents[f"identity:{role}/{policy_name}"] = document
    if extracted.key_policy is not None:
        documents["key"] = extracted.key_policy
    for service, endpoint_policy in extracted.interface_endpoints.items():
        if endpoint_policy is not None:
            documents[f"endpoint:{service}"] = endpoint_policy
    documents.update(load_control_policies(spec, base))
    guardrails = guardrail_scps(spec)
    if guardrails is not None:
        documents[GUARDRAIL_POLICY_ID] = guardrails
    org_accounts = frozenset({spec.accounts.compute, spec.accounts.data}) if spec.organization_id else frozenset()
    endpoint_ids = {}
    if spec.network.sagemaker_api_endpoint_id is not None:
        endpoint_ids["sagemaker.api"] = spec.network.sagemaker_api_endpoint_id
    gateway = (
        {"s3_gateway_endpoint_id": spec.network.s3_gateway_endpoint_id} if spec.network.s3_gateway_endpoint_id else {}
    )
    return PolicySet(
        documents=documents,
        role_arns=role_arns,
        organization_id=spec.organization_id,
        organization_accounts=org_accounts,
        vpc_id=spec.network.vpc_id,
        interface_endpoint_ids=endpoint_ids,
        **gateway,
    )


def matrix_context(spec: DeploymentSpec, extracted: ExtractedPolicies) -> MatrixContext:
    aliases = (spec.kms_key_alias,) if spec.kms_key_is_managed else ()
    return MatrixContext(extracted.key_arn, aliases, spec.s3_service_principal_for_kms, extracted.metrics_workspace_arn)
