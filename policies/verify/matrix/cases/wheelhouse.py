"""Wheelhouse cases, and the per-spec adjustments every case gets."""

from __future__ import annotations

from dataclasses import replace

from policies.documents import READ_OBJECT_ACTIONS, WRITE_OBJECT_ACTIONS
from policies.endpoint import wheelhouse_location
from policies.verify.harness.layers import (
    BUCKET,
    ENDPOINT,
    IDENTITY,
    KEY,
    KMS_IDENTITY,
)
from policies.verify.harness.model import (
    Principal,
    S3Request,
)
from policies.verify.matrix.model import Case, explicit, implicit, merge
from spec import DeploymentSpec


def adjusted(case: Case, spec: DeploymentSpec) -> Case:
    """Expectations that depend on options of the spec rather than on the case itself."""
    denials = dict(case.denials)
    if case.request.principal.role is None:
        # Not our identity policies: not evaluated, so not expected to deny.
        denials.pop(IDENTITY, None)
        denials.pop(KMS_IDENTITY, None)
    if not spec.kms_key_is_managed:
        denials.pop(KEY, None)  # the spec's own key: its policy is the owner's, not in the templates
    request = case.request
    if spec.perimeter.require_vpc_origin_on_bucket and isinstance(request, S3Request) and request.ours:
        has_writers = any(d.writers for d in spec.data.datasets)
        object_actions = {*READ_OBJECT_ACTIONS, *(WRITE_OBJECT_ACTIONS if has_writers else ())}
        from_vpc_access_point = request.access_point is not None and request.network.origin == "VPC"
        if request.action in object_actions and not from_vpc_access_point:
            denials = merge(denials, explicit(BUCKET, "DenyObjectAccessNotFromVpcAccessPoints"))
    if case.denials and not denials:
        raise ValueError(f"case {case.case_id}: no layer of ours is left to deny it under this spec")
    return replace(case, denials=denials) if denials != case.denials else case


def wheelhouse_cases(spec: DeploymentSpec) -> list[Case]:
    """The offline wheelhouse (cluster.python_wheelhouse): its prefix is reachable, the rest of its bucket not."""
    location = wheelhouse_location(spec)
    if location is None:
        return []
    bucket, prefix = location
    node = Principal("head node (endpoint layer only)", spec.role_arn("head-node"), spec.organization_id)
    compute = spec.accounts.compute

    def read(key: str) -> S3Request:
        return S3Request(node, "s3:GetObject", bucket, compute, key=key, ours=False)

    return [
        Case(
            "head-node-reads-wheelhouse",
            "platform",
            f"the head node reads wheels under s3://{bucket}/{prefix}",
            read(f"{prefix}torch-2.13.0-cp311-linux_x86_64.whl"),
            {},
            why="an offline cluster builds its Python environment from the wheelhouse",
        ),
        Case(
            "head-node-reads-beside-wheelhouse",
            "platform",
            f"the head node reads s3://{bucket}/ outside the wheelhouse prefix",
            read("private/credentials.json"),
            implicit(ENDPOINT),
            why="the endpoint opens the wheelhouse prefix, not its bucket",
        ),
    ]
