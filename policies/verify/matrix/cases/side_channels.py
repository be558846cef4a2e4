"""Side channels around the access point path: a writer's choice of encryption, access points pinned to the VPC."""

from __future__ import annotations

from dataclasses import replace

from policies.verify.harness.layers import (
    ACCESS_POINT,
    BUCKET,
    IDENTITY,
    KEY,
    KMS_IDENTITY,
)
from policies.verify.harness.model import (
    AccessPointTarget,
    Network,
    Principal,
    S3Request,
)
from policies.verify.matrix.cases.common import spec_role, through_access_point
from policies.verify.matrix.model import Case, MatrixContext, explicit, implicit, merge
from spec import DeploymentSpec

SSE = "s3:x-amz-server-side-encryption"
SSE_KEY = "s3:x-amz-server-side-encryption-aws-kms-key-id"
SSE_C = "s3:x-amz-server-side-encryption-customer-algorithm"


def encryption_cases(spec: DeploymentSpec, context: MatrixContext) -> list[Case]:
    """Writers cannot choose their encryption: the dataset key, or nothing (the bucket default, the same key)."""
    dataset = next((d for d in spec.data.datasets if d.writers), None)
    if dataset is None:
        return []
    assert dataset.output_prefix is not None
    ref = dataset.writers[0]
    who = spec_role(spec, ref)
    key = f"{dataset.output_prefix}shard-00001.bin"
    write = through_access_point(spec, who, "s3:PutObject", dataset, key=key)
    other_key = f"arn:aws:kms:{spec.region}:{spec.accounts.data}:key/0a0a0a0a-1b1b-2c2c-3d3d-4e4e4e4e4e4e"
    tag = f"{dataset.name}/{ref}"

    def headers(**values: str) -> tuple[tuple[str, str], ...]:
        names = {"sse": SSE, "key": SSE_KEY, "customer": SSE_C}
        return tuple((names[k], v) for k, v in values.items())

    return [
        Case(
            f"write-with-dataset-key/{tag}",
            "grant",
            f"{ref} writes under {dataset.output_prefix} asking for SSE-KMS with the dataset key "
            "(as CreateMultipartUpload does)",
            replace(write, headers=headers(sse="aws:kms", key=context.key_arn)),
            {},
            why="naming the dataset key is what the bucket default does anyway",
        ),
        Case(
            f"write-multipart-part/{tag}",
            "grant",
            f"{ref} uploads a part of a multipart upload (UploadPart: s3:PutObject without encryption headers)",
            write,
            {},
            why="parts carry no encryption headers; the upload's key was fixed when it was created",
        ),
        Case(
            f"write-with-other-key/{tag}",
            "perimeter",
            f"{ref} writes asking for SSE-KMS with another key of the data account",
            replace(write, headers=headers(sse="aws:kms", key=other_key)),
            merge(explicit(BUCKET, "DenyWritesWithOtherKey"), implicit(KMS_IDENTITY)),
            why="objects another key encrypts would leave the dataset key's policy behind",
        ),
        Case(
            f"write-with-aws-managed-key/{tag}",
            "perimeter",
            f"{ref} writes asking for SSE-KMS without a key id (S3 then uses the AWS managed key aws/s3)",
            replace(write, headers=headers(sse="aws:kms")),
            merge(explicit(BUCKET, "DenyWritesWithOtherKey"), implicit(KMS_IDENTITY)),
            why="the AWS managed key has a policy nobody here wrote",
        ),
        Case(
            f"write-with-sse-s3/{tag}",
            "perimeter",
            f"{ref} writes asking for SSE-S3 (AES256) instead of the dataset key",
            replace(write, headers=headers(sse="AES256")),
            explicit(BUCKET, "DenyWritesWithOtherEncryption", "DenyWritesWithOtherKey"),
            why="SSE-S3 objects are readable by anyone S3 lets read them, with no key policy in the way",
        ),
        Case(
            f"write-with-customer-key/{tag}",
            "perimeter",
            f"{ref} writes with a key of its own (SSE-C)",
            replace(write, headers=headers(customer="AES256")),
            explicit(BUCKET, "DenyWritesWithCustomerKeys"),
            why="an SSE-C object is unreadable to everyone but the writer: ransom by encryption",
        ),
    ]


def access_point_pinning_cases(spec: DeploymentSpec) -> list[Case]:
    """The bucket delegates to the spec's access points by ARN; the access points to our gateway endpoint."""
    dataset = next(d for d in spec.data.datasets if d.readers)
    ref = dataset.readers[0]
    reader = spec_role(spec, ref)
    sample = f"{dataset.prefix}shard-00000.bin"
    rogue = AccessPointTarget(f"arn:aws:s3:{spec.region}:{spec.accounts.data}:accesspoint/rogue-public", owned=False)
    admin = Principal(
        "compute admin (s3:*, kms:* on *)", f"arn:aws:iam::{spec.accounts.compute}:role/ops-admin", spec.organization_id
    )
    internet = Network(through_endpoint=False, origin="Internet")
    cases = [
        Case(
            "new-data-account-access-point",
            "perimeter",
            f"{ref} reads through a new Internet-origin access point someone created in the data account",
            S3Request(
                reader, "s3:GetObject", spec.data.bucket_name, spec.accounts.data, key=sample, access_point=rogue
            ).with_network(through_endpoint=False, origin="Internet"),
            implicit(IDENTITY, BUCKET),
            why="the bucket delegates to the spec's access point ARNs, not to every access point of its account",
        ),
        Case(
            "new-data-account-access-point-by-admin",
            "perimeter",
            "a compute-account administrator reads through a new access point of the data account, from the Internet",
            S3Request(
                admin,
                "s3:GetObject",
                spec.data.bucket_name,
                spec.accounts.data,
                key=sample,
                access_point=rogue,
                network=internet,
            ),
            implicit(BUCKET, KEY),
            why="the bucket alone stops an access point it does not name",
        ),
    ]
    if spec.network.s3_gateway_endpoint_id is not None:
        cases.append(
            Case(
                "other-s3-endpoint-in-the-vpc",
                "perimeter",
                f"{ref} reads through its access point via a second S3 endpoint in the VPC (with the default policy)",
                through_access_point(spec, reader, "s3:GetObject", dataset, key=sample).with_network(
                    through_endpoint=False, other_endpoint="vpce-0ffffffffffffffff"
                ),
                implicit(ACCESS_POINT),
                why="aws:SourceVpce pins the access points to the gateway endpoint whose policy we wrote",
            )
        )
    return cases
