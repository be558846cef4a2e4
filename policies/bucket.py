"""Bucket policy: TLS only, delegation to the spec's access points, the dataset key on every write.

Access control lives in the access point policies; the bucket only says "requests that came through
one of these access points may do what that access point allows". Delegation names the access
points by ARN (they are deterministic), not only their account: an access point someone adds to the
data account later, Internet-origin or not, reaches nothing.

Writers cannot choose their encryption: a PUT (multipart uploads are authorized as PutObject) that
asks for anything but SSE-KMS with the dataset key's ARN (SSE-S3, DSSE, another key, SSE-KMS without a
key id, which means the AWS managed key aws/s3), or brings its own key (SSE-C), is denied. A PUT that
asks for no encryption gets the bucket default, which is the dataset key.
"""

from __future__ import annotations

from policies.documents import (
    LIST_ACTIONS,
    READ_OBJECT_ACTIONS,
    WRITE_OBJECT_ACTIONS,
    PolicyDocument,
    Statement,
    document,
    statement,
)
from spec.model import DeploymentSpec

ANY_PRINCIPAL = {"AWS": "*"}


def bucket_policy(spec: DeploymentSpec, key_arn: str) -> PolicyDocument:
    """`key_arn`: the dataset key's ARN (the spec's key, or the managed key's ARN as the stack renders it)."""
    bucket = spec.bucket_arn
    objects = f"{bucket}/*"
    access_points = [spec.access_point_arn(d) for d in spec.data.datasets]
    via_own_access_points = {"StringEquals": {"s3:DataAccessPointArn": access_points}}
    has_writers = any(d.writers for d in spec.data.datasets)
    object_actions = [*READ_OBJECT_ACTIONS, *(WRITE_OBJECT_ACTIONS if has_writers else ())]

    statements: list[Statement] = [
        tls_only([bucket, objects]),
        statement(
            "DelegateListToOwnAccessPoints", "Allow", LIST_ACTIONS, [bucket], ANY_PRINCIPAL, via_own_access_points
        ),
        statement(
            "DelegateObjectAccessToOwnAccessPoints",
            "Allow",
            object_actions,
            [objects],
            ANY_PRINCIPAL,
            via_own_access_points,
        ),
    ]
    statements += [
        statement(
            "DenyWritesWithOtherEncryption",
            "Deny",
            ["s3:PutObject"],
            [objects],
            ANY_PRINCIPAL,
            # Only when the writer asks for an encryption: without the header the bucket default applies.
            {
                "StringNotEquals": {"s3:x-amz-server-side-encryption": "aws:kms"},
                "Null": {"s3:x-amz-server-side-encryption": "false"},
            },
        ),
        statement(
            "DenyWritesWithOtherKey",
            "Deny",
            ["s3:PutObject"],
            [objects],
            ANY_PRINCIPAL,
            # SSE-KMS without a key id would use the AWS managed key aws/s3: a missing key id is another key.
            {
                "StringNotEquals": {"s3:x-amz-server-side-encryption-aws-kms-key-id": key_arn},
                "Null": {"s3:x-amz-server-side-encryption": "false"},
            },
        ),
        statement(
            "DenyWritesWithCustomerKeys",
            "Deny",
            ["s3:PutObject"],
            [objects],
            ANY_PRINCIPAL,
            {"Null": {"s3:x-amz-server-side-encryption-customer-algorithm": "false"}},
        ),
    ]
    statements += organization_perimeter(spec, [bucket, objects])
    if spec.perimeter.require_vpc_origin_on_bucket:
        statements.append(
            statement(
                "DenyObjectAccessNotFromVpcAccessPoints",
                "Deny",
                [*object_actions],
                [objects],
                ANY_PRINCIPAL,
                # A missing key (a request not through an access point) also matches StringNotEquals.
                {"StringNotEquals": {"s3:AccessPointNetworkOrigin": "VPC"}},
            )
        )
    return document(*statements)


def tls_only(resources: list[str]) -> Statement:
    """No request without TLS reaches `resources` (every bucket this repo makes)."""
    return statement(
        "DenyRequestsWithoutTls", "Deny", ["s3:*"], resources, ANY_PRINCIPAL, {"Bool": {"aws:SecureTransport": "false"}}
    )


def organization_perimeter(spec: DeploymentSpec, resources: list[str]) -> list[Statement]:
    """With `perimeter.organization_bound`: no principal outside the organization reaches `resources` (one bucket
    policy statement, shared by every bucket this repo makes)."""
    if not spec.perimeter.organization_bound:
        return []
    assert spec.organization_id is not None  # the spec checks guarantee it
    return [
        statement(
            "DenyPrincipalsOutsideOrganization",
            "Deny",
            ["s3:*"],
            resources,
            ANY_PRINCIPAL,
            {
                "StringNotEqualsIfExists": {"aws:PrincipalOrgID": spec.organization_id},
                # S3 server access logging and other AWS services act without an org id.
                "BoolIfExists": {"aws:PrincipalIsAWSService": "false"},
            },
        )
    ]
