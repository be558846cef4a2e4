"""Dataset cases: every reader and writer, what they may do and the nearest things they may not."""

from __future__ import annotations

from dataclasses import replace

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
    Network,
    Principal,
    S3Request,
)
from policies.verify.matrix.cases.common import ALL_S3_LAYERS, sibling_prefix, spec_role, through_access_point
from policies.verify.matrix.model import Case, implicit
from spec import DeploymentSpec


def dataset_cases(spec: DeploymentSpec) -> list[Case]:
    cases: list[Case] = []
    has_writers = any(d.writers for d in spec.data.datasets)
    for dataset in spec.data.datasets:
        prefix = dataset.prefix
        sample = f"{prefix}shard-00000.bin"
        for ref in dataset.readers:
            who = spec_role(spec, ref)
            tag = f"{dataset.name}/{ref}"
            cases += [
                Case(
                    f"read/{tag}",
                    "grant",
                    f"{ref} reads {dataset.name} under {prefix} through its access point",
                    through_access_point(spec, who, "s3:GetObject", dataset, key=sample),
                    {},
                    why="readers read their dataset: every layer allows, the key decrypts through S3",
                ),
                Case(
                    f"list/{tag}",
                    "grant",
                    f"{ref} lists {dataset.name} under {prefix}",
                    through_access_point(spec, who, "s3:ListBucket", dataset, list_prefix=prefix),
                    {},
                    why="readers list their dataset's prefix",
                ),
                Case(
                    f"read-sibling-prefix/{tag}",
                    "grant",
                    f"{ref} reads {sibling_prefix(prefix)} through {dataset.name}'s access point",
                    through_access_point(
                        spec, who, "s3:GetObject", dataset, key=f"{sibling_prefix(prefix)}shard-00000.bin"
                    ),
                    implicit(IDENTITY, ACCESS_POINT),
                    why="a grant stops at its folder: 'data/' does not cover 'data-private/'",
                ),
                Case(
                    f"list-sibling-prefix/{tag}",
                    "grant",
                    f"{ref} lists {sibling_prefix(prefix)} through {dataset.name}'s access point",
                    through_access_point(spec, who, "s3:ListBucket", dataset, list_prefix=sibling_prefix(prefix)),
                    implicit(IDENTITY, ACCESS_POINT),
                    why="listing is scoped by s3:prefix to the dataset's folder",
                ),
                Case(
                    f"delete/{tag}",
                    "grant",
                    f"{ref} deletes under {prefix}",
                    through_access_point(spec, who, "s3:DeleteObject", dataset, key=sample),
                    implicit(*ALL_S3_LAYERS),
                    why="no layer grants deletes: datasets are immutable from the compute side",
                ),
                Case(
                    f"list-versions/{tag}",
                    "grant",
                    f"{ref} lists object versions under {prefix}",
                    through_access_point(spec, who, "s3:ListBucketVersions", dataset, list_prefix=prefix),
                    implicit(*ALL_S3_LAYERS),
                    why="old versions of replaced objects are not part of the grant",
                ),
            ]
            direct = S3Request(who, "s3:GetObject", spec.data.bucket_name, spec.accounts.data, key=sample)
            cases += [
                Case(
                    f"read-bucket-directly/{tag}",
                    "grant",
                    f"{ref} reads {dataset.name} on the bucket directly, without its access point",
                    direct,
                    implicit(IDENTITY, BUCKET),
                    why="the bucket delegates to its access points only",
                ),
                Case(
                    f"list-bucket-directly/{tag}",
                    "grant",
                    f"{ref} lists {prefix} on the bucket directly, without its access point",
                    replace(direct, action="s3:ListBucket", key=None, list_prefix=prefix),
                    implicit(IDENTITY, BUCKET),
                    why="listing is delegated to the access points too",
                ),
            ]
            if ref not in dataset.writers:
                denials = implicit(IDENTITY, ACCESS_POINT)
                if not spec.datasets_writable_by(ref):
                    denials.update(implicit(KMS_IDENTITY, KEY))
                if not has_writers:
                    denials.update(implicit(ENDPOINT, ENDPOINT_BUCKET, BUCKET))
                cases.append(
                    Case(
                        f"write-through-read-grant/{tag}",
                        "grant",
                        f"{ref} writes under {prefix} with its read grant",
                        through_access_point(spec, who, "s3:PutObject", dataset, key=f"{prefix}upload.bin"),
                        denials,
                        why="a read grant never writes",
                    )
                )
        for ref in dataset.writers:
            assert dataset.output_prefix is not None
            who = spec_role(spec, ref)
            tag = f"{dataset.name}/{ref}"
            output = dataset.output_prefix
            cases += [
                Case(
                    f"write/{tag}",
                    "grant",
                    f"{ref} writes {dataset.name} under {output}",
                    through_access_point(spec, who, "s3:PutObject", dataset, key=f"{output}shard-00000.bin"),
                    {},
                    why="writers put under their output prefix; the key generates data keys through S3",
                ),
                Case(
                    f"write-beside-output/{tag}",
                    "grant",
                    f"{ref} writes {sibling_prefix(output)}, beside its output prefix",
                    through_access_point(
                        spec, who, "s3:PutObject", dataset, key=f"{sibling_prefix(output)}shard-00000.bin"
                    ),
                    implicit(IDENTITY, ACCESS_POINT),
                    why="writes stop at the output folder",
                ),
                Case(
                    f"delete-output/{tag}",
                    "grant",
                    f"{ref} deletes under its output prefix {output}",
                    through_access_point(spec, who, "s3:DeleteObject", dataset, key=f"{output}shard-00000.bin"),
                    implicit(*ALL_S3_LAYERS),
                    why="writers add objects; they do not delete them",
                ),
            ]
        # Each restricted queue's role too: the partition of group A must not reach group B's dataset.
        for ref in [*spec.builtin_roles_in_use, *spec.queue_roles]:
            if ref in dataset.readers or ref in dataset.writers:
                continue
            cases.append(
                Case(
                    f"read-other-dataset/{dataset.name}/{ref}",
                    "grant",
                    f"{ref}, not a reader of {dataset.name}, reads it through its access point",
                    through_access_point(spec, spec_role(spec, ref), "s3:GetObject", dataset, key=sample),
                    implicit(IDENTITY, ACCESS_POINT),
                    why="a role reads only the datasets that name it",
                )
            )
    return cases


def dataset_perimeter_cases(spec: DeploymentSpec) -> list[Case]:
    """Per dataset and per access point statement: callers the statement must not admit."""
    admin = Principal(
        "compute admin (s3:*, kms:* on *)", f"arn:aws:iam::{spec.accounts.compute}:role/ops-admin", spec.organization_id
    )
    cases: list[Case] = []
    for dataset in spec.data.datasets:
        requests: list[tuple[str, str, str, str | None, str | None]] = []  # verb, role, action, key, list prefix
        if dataset.readers:
            requests += [
                ("read", dataset.readers[0], "s3:GetObject", f"{dataset.prefix}shard-00000.bin", None),
                ("list", dataset.readers[0], "s3:ListBucket", None, dataset.prefix),
            ]
        if dataset.writers:
            assert dataset.output_prefix is not None
            requests.append(
                ("write", dataset.writers[0], "s3:PutObject", f"{dataset.output_prefix}shard-00000.bin", None)
            )
        for verb, ref, action, key, list_prefix in requests:
            reaches_key = action != "s3:ListBucket"
            cases += [
                Case(
                    f"unrelated-role-{verb}/{dataset.name}",
                    "perimeter",
                    f"an unrelated compute-account role with s3:* and kms:* on * tries to {verb} {dataset.name}",
                    through_access_point(spec, admin, action, dataset, key=key, list_prefix=list_prefix),
                    implicit(ACCESS_POINT, KEY) if reaches_key else implicit(ACCESS_POINT),
                    why="the access point and the key trust named roles, not the whole compute account",
                ),
                Case(
                    f"internet-origin-{verb}/{dataset.name}",
                    "perimeter",
                    f"{ref}'s credentials {verb} {dataset.name} through its access point from the Internet",
                    through_access_point(
                        spec, spec_role(spec, ref), action, dataset, key=key, list_prefix=list_prefix
                    ).with_network(origin="Internet", through_endpoint=False),
                    implicit(ACCESS_POINT),
                    why="the access point serves the compute VPC only (its VpcConfiguration, and its policy)",
                ),
            ]
    return cases


def data_account_upload_cases(spec: DeploymentSpec) -> list[Case]:
    """The data account's administrator puts an object under each dataset's prefix straight into the bucket, from
    outside the VPC, asking for no encryption (README's first object): the way data gets in."""
    admin = Principal(
        "data-account administrator", f"arn:aws:iam::{spec.accounts.data}:role/storage-admin", spec.organization_id
    )
    return [
        Case(
            f"data-account-upload/{dataset.name}",
            "grant",
            f"the data account's administrator uploads under {dataset.prefix} straight to the bucket",
            S3Request(
                admin,
                "s3:PutObject",
                spec.data.bucket_name,
                spec.accounts.data,
                key=f"{dataset.prefix}sample.txt",
                network=Network(through_endpoint=False),
            ),
            {},
            why="the bucket delegates to the access points but does not shut out its own account; the object gets "
            "the bucket's default key, which the data account administers",
        )
        for dataset in spec.data.datasets
    ]
