"""Bucket policy: TLS only, delegation to the data account's access points, and nothing else.

Access control lives in the access point policies; the bucket only says "requests that came
through an access point of the owning account may do what that access point allows".
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


def bucket_policy(spec: DeploymentSpec) -> PolicyDocument:
    bucket = spec.bucket_arn
    objects = f"{bucket}/*"
    via_own_access_points = {"StringEquals": {"s3:DataAccessPointAccount": spec.accounts.data}}
    has_writers = any(d.writers for d in spec.data.datasets)
    object_actions = [*READ_OBJECT_ACTIONS, *(WRITE_OBJECT_ACTIONS if has_writers else ())]

    statements: list[Statement] = [
        statement(
            "DenyRequestsWithoutTls",
            "Deny",
            ["s3:*"],
            [bucket, objects],
            ANY_PRINCIPAL,
            {"Bool": {"aws:SecureTransport": "false"}},
        ),
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
    if spec.perimeter.organization_bound:
        assert spec.organization_id is not None  # the spec checks guarantee it
        statements.append(
            statement(
                "DenyPrincipalsOutsideOrganization",
                "Deny",
                ["s3:*"],
                [bucket, objects],
                ANY_PRINCIPAL,
                {
                    "StringNotEqualsIfExists": {"aws:PrincipalOrgID": spec.organization_id},
                    # S3 server access logging and other AWS services act without an org id.
                    "BoolIfExists": {"aws:PrincipalIsAWSService": "false"},
                },
            )
        )
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
