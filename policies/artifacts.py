"""The nodes' offline artifacts (spec.artifacts): who reads which folder, and the artifacts bucket's own policy.

Read only, folder by folder: the head node reads the Python wheelhouse (and the exporters' binaries in its
observability/ folder) to build the training env on shared storage and stage the binaries for the compute nodes,
and the nccl-tests source its user copies to /fsx (docs/fabric-checks.md); Trainium compute nodes read the NxDT
wheelhouse (cluster/bootstrap/nxdt_install.sh), of which the head node reads one object, NxDT's examples tarball
(its user unpacks the launcher onto /fsx, docs/jobs.md). Nothing in the VPC writes there: `make upload-artifacts`
does, from outside, with the operator's own credentials. The S3 gateway endpoint names the same folders
(policies.endpoint), so a node reaches nothing else of the bucket either.
"""

from __future__ import annotations

from policies.bucket import organization_perimeter, tls_only
from policies.documents import PolicyDocument, Statement, document, statement
from spec.artifacts import NXDT_EXAMPLES, S3Folder, artifact_locations, artifacts_bucket_name
from spec.model import DeploymentSpec, is_queue_role

# The inline policy the artifacts stack attaches to each reading role (stacks/parts/artifacts_bucket.py).
ARTIFACTS_POLICY_NAME = "artifacts"
READERS: tuple[str, ...] = ("head-node", "cluster-node")


def artifact_readers(spec: DeploymentSpec) -> tuple[str, ...]:
    """READERS and each restricted queue's role, which boots its nodes as cluster-node boots the others."""
    return (*READERS, *spec.queue_roles)


def folders_read_by(spec: DeploymentSpec, role: str) -> list[tuple[str, S3Folder]]:
    """(statement name, folder) of every artifact folder `role` reads: at boot, or its users (the nccl-tests source)."""
    locations = artifact_locations(spec)
    wanted = {
        "head-node": [("PythonWheelhouse", locations.python_wheelhouse), ("NcclTestsSource", locations.nccl_tests)],
        "cluster-node": [("NxdtWheelhouse", locations.nxdt_wheelhouse)],
    }.get("cluster-node" if is_queue_role(role) else role, [])
    return [(name, folder) for name, folder in wanted if folder is not None]


def objects_read_by(spec: DeploymentSpec, role: str) -> list[tuple[str, str]]:
    """(statement name, object ARN) of single artifacts `role` reads beside the folders above: the head node, NxDT's
    examples tarball in the Trainium nodes' folder (s3:GetObject only: `aws s3 cp` of one key lists nothing)."""
    nxdt = artifact_locations(spec).nxdt_wheelhouse
    if role != "head-node" or nxdt is None:
        return []
    return [("NxdtExamples", nxdt.object_arn(NXDT_EXAMPLES))]


def artifacts_read_policy(spec: DeploymentSpec, role: str) -> PolicyDocument | None:
    """The identity policy of a node role on its artifact folders: s3:GetObject under each folder and
    s3:ListBucket for that folder only (what `aws s3 sync` needs); None when the role reads none."""
    statements: list[Statement] = []
    for name, folder in folders_read_by(spec, role):
        statements += [
            statement(f"Read{name}", "Allow", ["s3:GetObject"], [folder.objects_arn]),
            statement(
                f"List{name}",
                "Allow",
                ["s3:ListBucket"],
                [folder.bucket_arn],
                conditions={"StringLike": {"s3:prefix": f"{folder.prefix}*"}},
            ),
        ]
    statements += [
        statement(f"Read{name}", "Allow", ["s3:GetObject"], [arn]) for name, arn in objects_read_by(spec, role)
    ]
    return document(*statements) if statements else None


def artifacts_bucket_policy(spec: DeploymentSpec) -> PolicyDocument:
    """TLS only and, with the organization perimeter, the organization's principals only. It grants nothing:
    the compute account's identity policies (the nodes' above, the operator's own) decide who reads and writes."""
    bucket = f"arn:aws:s3:::{artifacts_bucket_name(spec)}"
    objects = f"{bucket}/*"
    return document(tls_only([bucket, objects]), *organization_perimeter(spec, [bucket, objects]))
