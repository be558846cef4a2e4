"""What the case families share: the spec's roles as principals, a dataset's access point, requests through it."""

from __future__ import annotations

from policies.principals import PRINCIPALS
from policies.verify.harness.layers import (
    ACCESS_POINT,
    BUCKET,
    ENDPOINT,
    ENDPOINT_BUCKET,
    IDENTITY,
    KEY,
    KMS_IDENTITY,
)
from policies.verify.harness.model import (
    AccessPointTarget,
    Principal,
    S3Request,
)
from policies.verify.matrix.model import Case, implicit
from spec import DatasetSpec, DeploymentSpec
from spec.model import is_queue_role


def spec_role(spec: DeploymentSpec, ref: str) -> Principal:
    """A reader/writer; only our principals' identity policies are in the templates (a role given
    by ARN belongs to someone else: its identity policies are assumed to allow)."""
    ours = ref in {entry.key for entry in PRINCIPALS} or is_queue_role(ref)
    role = spec.role_name(ref) if ours else None
    return Principal(label=ref, arn=spec.role_arn(ref), org_id=spec.organization_id, role=role)


def dataset_access_point(spec: DeploymentSpec, dataset: DatasetSpec) -> AccessPointTarget:
    return AccessPointTarget(spec.access_point_arn(dataset), owned=True)


def through_access_point(
    spec: DeploymentSpec,
    principal: Principal,
    action: str,
    dataset: DatasetSpec,
    key: str | None = None,
    list_prefix: str | None = None,
) -> S3Request:
    return S3Request(
        principal=principal,
        action=action,
        bucket=spec.data.bucket_name,
        bucket_account=spec.accounts.data,
        key=key,
        list_prefix=list_prefix,
        access_point=dataset_access_point(spec, dataset),
    )


def sibling_prefix(prefix: str) -> str:
    """A prefix that shares the string but not the folder: 'data/' -> 'data-private/'."""
    return prefix.rstrip("/") + "-private/"


ALL_S3_LAYERS: tuple[str, ...] = (IDENTITY, ENDPOINT, ENDPOINT_BUCKET, ACCESS_POINT, BUCKET)


def no_dataset_reads(
    spec: DeploymentSpec, principal: Principal, case_prefix: str, group: str, who: str, why: str
) -> list[Case]:
    """A case per dataset: `principal`, a role that holds no dataset grant, reads it through its access point from
    inside the VPC and is refused by its own policies, the access point's and the key's."""
    return [
        Case(
            f"{case_prefix}/read/{dataset.name}",
            group,
            f"{who} reads dataset {dataset.name} through its access point, from inside the VPC",
            through_access_point(spec, principal, "s3:GetObject", dataset, key=f"{dataset.prefix}sample.txt"),
            implicit(IDENTITY, ACCESS_POINT, KMS_IDENTITY, KEY),
            why=why,
        )
        for dataset in spec.data.datasets
    ]
