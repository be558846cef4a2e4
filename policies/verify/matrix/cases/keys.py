"""Key cases: the dataset key used through S3 only, by the principals the datasets name."""

from __future__ import annotations

from policies.verify.harness.layers import (
    KEY,
    KMS_IDENTITY,
)
from policies.verify.harness.model import (
    KmsRequest,
    Principal,
)
from policies.verify.matrix.cases.common import spec_role
from policies.verify.matrix.model import OUTSIDE_ACCOUNT, Case, MatrixContext, implicit
from spec import DeploymentSpec


def key_cases(spec: DeploymentSpec, context: MatrixContext) -> list[Case]:
    """Per role: the dataset key only through S3, only this key."""
    cases: list[Case] = []
    managed = spec.kms_key_is_managed
    other_key = f"arn:aws:kms:{spec.region}:{spec.accounts.data}:key/0a0a0a0a-1b1b-2c2c-3d3d-4e4e4e4e4e4e"
    foreign_key = f"arn:aws:kms:{spec.region}:{OUTSIDE_ACCOUNT}:key/5f5f5f5f-6a6a-7b7b-8c8c-9d9d9d9d9d9d"
    for ref in spec.builtin_roles_in_use:
        who = spec_role(spec, ref)
        cases += [
            Case(
                f"decrypt-outside-s3/{ref}",
                "perimeter",
                f"{ref} calls kms:Decrypt on the dataset key directly, not through S3, claiming the bucket's "
                "encryption context (any caller can)",
                KmsRequest(
                    who, "kms:Decrypt", context.key_arn, context.key_aliases, None, s3_arn_context=spec.bucket_arn
                ),
                implicit(KMS_IDENTITY, KEY) if managed else implicit(KMS_IDENTITY),
                why="the data key never leaves S3: kms:ViaService on both sides",
            ),
            Case(
                f"foreign-key-same-alias/{ref}",
                "perimeter",
                f"{ref} uses a key of account {OUTSIDE_ACCOUNT} that carries the same alias name, through S3",
                KmsRequest(who, "kms:Decrypt", foreign_key, context.key_aliases, context.via_service, ours=False),
                implicit(KMS_IDENTITY),
                why="the identity policy names the data account's keys, not any key with the alias",
            ),
        ]
        if managed:
            scratch = f"arn:aws:s3:::{spec.name}-scratch-{spec.accounts.compute}"
            cases.append(
                Case(
                    f"key-for-another-bucket/{ref}",
                    "perimeter",
                    f"{ref} has S3 decrypt an object of another bucket ({scratch}) with the dataset key",
                    KmsRequest(
                        who,
                        "kms:Decrypt",
                        context.key_arn,
                        context.key_aliases,
                        context.via_service,
                        s3_arn_context=scratch,
                    ),
                    implicit(KEY),
                    why="the key serves the dataset bucket only (kms:EncryptionContext:aws:s3:arn)",
                )
            )
            cases.append(
                Case(
                    f"other-data-account-key/{ref}",
                    "perimeter",
                    f"{ref} uses another key of the data account through S3",
                    KmsRequest(who, "kms:Decrypt", other_key, ("alias/another-team",), context.via_service, ours=False),
                    implicit(KMS_IDENTITY),
                    why="kms:ResourceAliases pins the identity grant to the dataset key",
                )
            )
    if managed:
        cases += [
            Case(
                "key-admin-manages-key",
                "perimeter",
                "an administrator of the data account updates the key policy",
                KmsRequest(
                    Principal(
                        "data-account key admin",
                        f"arn:aws:iam::{spec.accounts.data}:role/key-admin",
                        spec.organization_id,
                    ),
                    "kms:PutKeyPolicy",
                    context.key_arn,
                    context.key_aliases,
                    None,
                ),
                {},
                why="the key stays manageable: the data account's IAM decides who administers it",
            ),
            Case(
                "compute-admin-decrypts-key",
                "perimeter",
                "a compute-account administrator (kms:* on *) decrypts with the dataset key directly",
                KmsRequest(
                    Principal(
                        "compute admin", f"arn:aws:iam::{spec.accounts.compute}:role/ops-admin", spec.organization_id
                    ),
                    "kms:Decrypt",
                    context.key_arn,
                    context.key_aliases,
                    None,
                ),
                implicit(KEY),
                why="the key policy trusts only the dataset roles, whatever the compute account's IAM says",
            ),
        ]
    return cases
