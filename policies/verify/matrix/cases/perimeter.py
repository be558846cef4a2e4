"""Perimeter cases: other accounts and organizations, no TLS, Internet origin, exfiltration through the endpoint."""

from __future__ import annotations

from policies.verify.harness.layers import (
    ACCESS_POINT,
    BUCKET,
    ENDPOINT,
    ENDPOINT_BUCKET,
    IDENTITY,
    KEY,
)
from policies.verify.harness.model import (
    AccessPointTarget,
    Network,
    Principal,
    S3Request,
)
from policies.verify.matrix.cases.common import dataset_access_point, spec_role, through_access_point
from policies.verify.matrix.cases.platform import endpoint_without_access_points
from policies.verify.matrix.model import OTHER_ORG_ACCOUNT, OTHER_ORG_ID, OUTSIDE_ACCOUNT, Case, explicit, implicit
from spec import DeploymentSpec


def perimeter_cases(spec: DeploymentSpec) -> list[Case]:
    dataset = next(d for d in spec.data.datasets if d.readers)
    reader_ref = dataset.readers[0]
    reader = spec_role(spec, reader_ref)
    sample = f"{dataset.prefix}shard-00000.bin"
    bucket, data, compute, region = spec.data.bucket_name, spec.accounts.data, spec.accounts.compute, spec.region
    org = spec.organization_id
    read = through_access_point(spec, reader, "s3:GetObject", dataset, key=sample)
    org_deny = explicit(BUCKET, "DenyPrincipalsOutsideOrganization") if spec.perimeter.organization_bound else {}
    endpoint_org = implicit(ENDPOINT, ENDPOINT_BUCKET) if spec.perimeter.organization_bound else {}
    admin = Principal("compute admin (s3:*, kms:* on *)", f"arn:aws:iam::{compute}:role/ops-admin", org)
    intruder = Principal("other organization's role", f"arn:aws:iam::{OTHER_ORG_ACCOUNT}:role/intruder", OTHER_ORG_ID)
    same_name = Principal(
        f"{reader_ref} name in account {OUTSIDE_ACCOUNT}",
        f"arn:aws:iam::{OUTSIDE_ACCOUNT}:role/{spec.role_name(reader_ref)}",
        None,
        role=spec.role_name(reader_ref),
    )
    shadow_ap = AccessPointTarget(
        f"arn:aws:s3:{region}:{compute}:accesspoint/shadow-{dataset.access_point}", owned=False
    )
    outside_ap = AccessPointTarget(f"arn:aws:s3:{region}:{OUTSIDE_ACCOUNT}:accesspoint/drop", owned=False)
    no_endpoint = Network(through_endpoint=False, origin="Internet")

    def direct(principal: Principal, action: str, key: str | None, **changes: object) -> S3Request:
        return S3Request(principal, action, bucket, data, key=key, **changes)  # type: ignore[arg-type]

    return [
        Case(
            "same-role-name-other-account",
            "perimeter",
            f"a role named {spec.role_name(reader_ref)} in account {OUTSIDE_ACCOUNT}, with the same identity "
            "policy, reads through the access point from the compute VPC",
            S3Request(
                same_name, "s3:GetObject", bucket, data, key=sample, access_point=dataset_access_point(spec, dataset)
            ),
            {**endpoint_org, **implicit(ACCESS_POINT, KEY), **org_deny},
            why="names are not identities: the data account trusts the compute account's roles only",
        ),
        Case(
            "compute-account-access-point",
            "perimeter",
            f"{reader_ref} reads through an access point the compute account created on the bucket",
            S3Request(reader, "s3:GetObject", bucket, data, key=sample, access_point=shadow_ap),
            implicit(IDENTITY, ENDPOINT, BUCKET),
            why="only the data account's access points are delegated to (s3:DataAccessPointAccount)",
        ),
        Case(
            "compute-account-access-point-outside-vpc",
            "perimeter",
            "a compute-account administrator reads through its own access point on the bucket, outside the VPC",
            S3Request(admin, "s3:GetObject", bucket, data, key=sample, access_point=shadow_ap, network=no_endpoint),
            implicit(BUCKET, KEY),
            why="the bucket policy alone stops access points of other accounts",
        ),
        Case(
            "outside-account-access-point",
            "perimeter",
            f"account {OUTSIDE_ACCOUNT} reads through an access point it created on the bucket",
            S3Request(
                Principal("outside admin", f"arn:aws:iam::{OUTSIDE_ACCOUNT}:role/admin", None),
                "s3:GetObject",
                bucket,
                data,
                key=sample,
                access_point=AccessPointTarget(
                    f"arn:aws:s3:{region}:{OUTSIDE_ACCOUNT}:accesspoint/shadow", owned=False
                ),
                network=no_endpoint,
            ),
            {**implicit(KEY), **org_deny} if org_deny else implicit(BUCKET, KEY),
            why="an access point of another account is no way in",
        ),
        Case(
            "no-tls",
            "perimeter",
            f"{reader_ref} reads through the access point without TLS",
            read.with_network(tls=False),
            explicit(BUCKET, "DenyRequestsWithoutTls"),
            why="TLS only, whoever asks",
        ),
        Case(
            "list-whole-access-point",
            "perimeter",
            f"{reader_ref} lists the whole access point (no prefix)",
            through_access_point(spec, reader, "s3:ListBucket", dataset),
            implicit(IDENTITY, ACCESS_POINT),
            why="a listing without s3:prefix is a listing of everything",
        ),
        Case(
            "exfiltration-outside-bucket",
            "perimeter",
            f"{reader_ref} copies data to a bucket of account {OUTSIDE_ACCOUNT} through the endpoint",
            S3Request(reader, "s3:PutObject", "exfil-drop-333333333333", OUTSIDE_ACCOUNT, key="loot.bin", ours=False),
            implicit(IDENTITY, ENDPOINT),
            why="the endpoint names every bucket the VPC may use",
        ),
        Case(
            "exfiltration-by-admin",
            "perimeter",
            "a compute-account administrator (s3:* on *) copies data to an outside bucket through the endpoint",
            S3Request(admin, "s3:PutObject", "exfil-drop-333333333333", OUTSIDE_ACCOUNT, key="loot.bin", ours=False),
            implicit(ENDPOINT),
            why="the endpoint holds even when an identity policy is too broad",
        ),
        Case(
            "exfiltration-outside-access-point",
            "perimeter",
            f"a compute-account administrator writes through an access point of account {OUTSIDE_ACCOUNT}",
            S3Request(
                admin,
                "s3:PutObject",
                "drop-bucket-333333333333",
                OUTSIDE_ACCOUNT,
                key="loot.bin",
                access_point=outside_ap,
                ours=False,
            ),
            implicit(ENDPOINT, ENDPOINT_BUCKET),
            why="access points of other accounts are not listed at the endpoint",
        ),
        Case(
            "ingress-outside-bucket",
            "perimeter",
            "a compute-account administrator reads from an unvetted outside bucket through the endpoint",
            S3Request(admin, "s3:GetObject", "tools-333333333333", OUTSIDE_ACCOUNT, key="payload.sh", ours=False),
            implicit(ENDPOINT),
            why="the nodes read only the AWS-owned buckets they need",
        ),
        Case(
            "outside-organization-credentials",
            "perimeter",
            f"credentials of another organization (account {OTHER_ORG_ACCOUNT}, s3:* on *) read through the "
            "access point from the compute VPC",
            S3Request(
                intruder, "s3:GetObject", bucket, data, key=sample, access_point=dataset_access_point(spec, dataset)
            ),
            {**endpoint_org, **implicit(ACCESS_POINT, KEY), **org_deny},
            why="the organization is the perimeter: endpoint and bucket both check aws:PrincipalOrgID",
        ),
        Case(
            "aws-service-writes-bucket",
            "perimeter",
            "an AWS service principal (S3 server access logging) writes into the dataset bucket",
            S3Request(
                Principal("logging.s3.amazonaws.com", "logging.s3.amazonaws.com", None, is_aws_service=True),
                "s3:PutObject",
                bucket,
                data,
                key="logs/entry.log",
                network=no_endpoint,
            ),
            implicit(BUCKET, KEY),
            why="no statement grants a service; the organization Deny leaves services to the grants",
        ),
        Case(
            "endpoint-lists-only-bucket-arns",
            "perimeter",
            f"regression: with an endpoint policy naming only the bucket ARNs, {reader_ref} reads through the access point",
            read,
            implicit(ENDPOINT),
            variant=endpoint_without_access_points,
            why="the endpoint authorizes the access point ARN too, so both must be listed",
        ),
    ]
