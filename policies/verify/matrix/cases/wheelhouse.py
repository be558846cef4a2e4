"""The nodes' artifact cases (the wheelhouses, the nccl-tests source, NxDT's examples), and the per-spec adjustments
every case gets."""

from __future__ import annotations

from dataclasses import replace

from policies.artifacts import READERS, artifacts_read_policy, folders_read_by, objects_read_by
from policies.documents import READ_OBJECT_ACTIONS, WRITE_OBJECT_ACTIONS
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
from policies.verify.matrix.cases.common import spec_role
from policies.verify.matrix.model import (
    OTHER_ORG_ACCOUNT,
    OTHER_ORG_ID,
    OUTSIDE_ACCOUNT,
    Case,
    explicit,
    implicit,
    merge,
)
from spec import BUILTIN_ROLES, DeploymentSpec
from spec.artifacts import NXDT_EXAMPLES, S3Folder, artifact_locations


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


def _evaluable(spec: DeploymentSpec, ref: str) -> bool:
    """The role's identity policies are in the policy set both from the templates and from the builders."""
    return ref in spec.builtin_roles_in_use or artifacts_read_policy(spec, ref) is not None


def _folder_name_and_sample(spec: DeploymentSpec, folder: S3Folder) -> tuple[str, str, str]:
    """The folder's name in case ids, a key under it and that key's kind, in words."""
    if folder == artifact_locations(spec).nccl_tests:
        return "nccl-tests-source", f"{folder.prefix}nccl-tests-2.17.6.tar.gz", "the nccl-tests source tarball"
    name = "wheelhouse" if folder == artifact_locations(spec).python_wheelhouse else "nxdt-wheelhouse"
    return name, f"{folder.prefix}torch-2.13.0-cp311-linux_x86_64.whl", "a wheel"


def artifact_cases(spec: DeploymentSpec) -> list[Case]:
    """The nodes' artifacts (spec.artifacts): each reader reads and lists its folder, through its role and the
    endpoint; nothing in the VPC writes or deletes there, reads beside the folder, or reads another role's folder;
    credentials of another organization and a bucket of the same name in another account get nothing."""
    compute = spec.accounts.compute
    intruder = Principal("other organization's role", f"arn:aws:iam::{OTHER_ORG_ACCOUNT}:role/intruder", OTHER_ORG_ID)
    cases: list[Case] = []
    readers = [(ref, folder) for ref in READERS for _, folder in folders_read_by(spec, ref)]
    for ref, folder in readers:
        reader = spec_role(spec, ref)
        bucket, prefix = folder.bucket, folder.prefix
        name, sample, what = _folder_name_and_sample(spec, folder)

        def request(who: Principal, action: str, key: str | None, list_prefix: str | None = None,
                    account: str = compute, bucket: str = bucket) -> S3Request:  # fmt: skip
            return S3Request(who, action, bucket, account, key=key, list_prefix=list_prefix, ours=False)

        cases += [
            Case(
                f"{ref}-reads-{name}",
                "platform",
                f"the {ref} reads {what} under s3://{bucket}/{prefix}",
                request(reader, "s3:GetObject", sample),
                {},
                why="the nodes install without internet from the artifacts make upload-artifacts put there",
            ),
            Case(
                f"{ref}-lists-{name}",
                "platform",
                f"the {ref} lists s3://{bucket}/{prefix} (aws s3 sync)",
                request(reader, "s3:ListBucket", None, prefix),
                {},
                why="aws s3 sync lists the folder before it copies",
            ),
            Case(
                f"{ref}-writes-{name}",
                "platform",
                f"the {ref} plants {what} under s3://{bucket}/{prefix}",
                request(reader, "s3:PutObject", sample),
                implicit(IDENTITY, ENDPOINT),
                why="a node that could write there could plant code every node installs",
            ),
            Case(
                f"{ref}-deletes-{name}",
                "platform",
                f"the {ref} deletes {what} under s3://{bucket}/{prefix}",
                request(reader, "s3:DeleteObject", sample),
                implicit(IDENTITY, ENDPOINT),
                why="the artifacts are read-only from the VPC",
            ),
            Case(
                f"{ref}-reads-beside-{name}",
                "platform",
                f"the {ref} reads s3://{bucket}/ outside {prefix}",
                request(reader, "s3:GetObject", "private/credentials.json"),
                implicit(IDENTITY, ENDPOINT),
                why="the role and the endpoint open the folder, not its bucket",
            ),
            Case(
                f"{ref}-lists-beside-{name}",
                "platform",
                f"the {ref} lists the whole of s3://{bucket}/",
                request(reader, "s3:ListBucket", None, ""),
                implicit(IDENTITY),
                why="the role lists the folder only (s3:prefix)",
            ),
            Case(
                f"{ref}-reads-squatted-{name}",
                "platform",
                f"the {ref} reads s3://{bucket}/{prefix} of a bucket owned by account {OUTSIDE_ACCOUNT}",
                request(reader, "s3:GetObject", sample, account=OUTSIDE_ACCOUNT),
                implicit(ENDPOINT),
                why="a bucket name is not an owner: aws:ResourceAccount pins the compute account",
            ),
            Case(
                f"outside-credentials-read-{name}",
                "platform",
                f"credentials of another organization read s3://{bucket}/{prefix} through the endpoint",
                request(intruder, "s3:GetObject", sample),
                implicit(ENDPOINT) if spec.perimeter.organization_bound else {},
                why="the organization perimeter covers the artifacts too",
            ),
        ]
        binaries = artifact_locations(spec).observability_binaries
        if folder == artifact_locations(spec).python_wheelhouse and binaries is not None:
            cases.append(
                Case(
                    f"{ref}-reads-observability-binaries",
                    "platform",
                    f"the {ref} reads an exporter's binary under s3://{binaries.bucket}/{binaries.prefix}",
                    request(reader, "s3:GetObject", f"{binaries.prefix}node_exporter-1.8.2.linux-amd64.tar.gz"),
                    {},
                    why="the head node installs the pinned exporters and stages them for the compute nodes",
                )
            )
        for other in BUILTIN_ROLES:
            if other == ref or not _evaluable(spec, other) or (other == "notebook" and not spec.notebook.enabled):
                continue
            if any(f == folder for _, f in folders_read_by(spec, other)):
                continue
            cases.append(
                Case(
                    f"{other}-reads-{name}",
                    "platform",
                    f"the {other} reads {what} under s3://{bucket}/{prefix}",
                    request(spec_role(spec, other), "s3:GetObject", sample),
                    implicit(IDENTITY),
                    why=f"only the {ref} reads this folder; the endpoint cannot tell roles apart",
                )
            )
    nxdt = artifact_locations(spec).nxdt_wheelhouse
    for ref in READERS:
        if nxdt is None or not objects_read_by(spec, ref):
            continue
        reader = spec_role(spec, ref)
        examples = f"{nxdt.prefix}{NXDT_EXAMPLES}"
        cases += [
            Case(
                f"{ref}-reads-nxdt-examples",
                "platform",
                f"the {ref} reads NxDT's examples tarball s3://{nxdt.bucket}/{examples}",
                S3Request(reader, "s3:GetObject", nxdt.bucket, spec.accounts.compute, key=examples, ours=False),
                {},
                why="its user unpacks NxDT's launcher onto /fsx for the Trainium jobs (docs/jobs.md)",
            ),
            Case(
                f"{ref}-plants-nxdt-examples",
                "platform",
                f"the {ref} replaces NxDT's examples tarball s3://{nxdt.bucket}/{examples}",
                S3Request(reader, "s3:PutObject", nxdt.bucket, spec.accounts.compute, key=examples, ours=False),
                implicit(IDENTITY, ENDPOINT),
                why="the launcher every Trainium job runs comes from there",
            ),
        ]
    return cases
