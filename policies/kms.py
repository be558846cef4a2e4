"""Key policy of the dataset key (data account).

Cross-account SSE-KMS needs both sides: this key policy lets the dataset principals use the key,
and their identity policies (policies.identity) allow it on their side. Both are limited to
calls S3 makes on the caller's behalf (kms:ViaService), so a data key never decrypts outside S3, and
to the dataset bucket (kms:EncryptionContext:aws:s3:arn: the bucket with Bucket Keys, an object of it
without), so the dataset roles cannot encrypt or decrypt another bucket's objects with this key.
"""

from __future__ import annotations

from policies.documents import PolicyDocument, Statement, account_root, document, one_or_list, statement
from spec.model import DeploymentSpec

READ_KEY_ACTIONS: tuple[str, ...] = ("kms:Decrypt",)
# S3 asks for a data key on PUT, and decrypts it again to complete a multipart upload.
WRITE_KEY_ACTIONS: tuple[str, ...] = ("kms:GenerateDataKey", "kms:Decrypt")


def _through_s3_for(spec: DeploymentSpec, roles: list[str]) -> dict[str, dict[str, object]]:
    return {
        "StringEquals": {
            "kms:ViaService": spec.s3_service_principal_for_kms,
            "kms:CallerAccount": spec.accounts.compute,
        },
        "ArnLike": {"aws:PrincipalArn": one_or_list([spec.role_arn(r) for r in roles])},
        "StringLike": {"kms:EncryptionContext:aws:s3:arn": [spec.bucket_arn, f"{spec.bucket_arn}/*"]},
    }


def key_policy(spec: DeploymentSpec) -> PolicyDocument:
    readers = list(dict.fromkeys(r for d in spec.data.datasets for r in (*d.readers, *d.writers)))
    writers = list(dict.fromkeys(w for d in spec.data.datasets for w in d.writers))
    statements: list[Statement] = [
        # Without this the key becomes unmanageable; IAM in the data account decides who administers it.
        statement("DataAccountAdministersKey", "Allow", ["kms:*"], ["*"], account_root(spec.accounts.data)),
        statement(
            "DatasetPrincipalsDecryptThroughS3",
            "Allow",
            READ_KEY_ACTIONS,
            ["*"],
            account_root(spec.accounts.compute),
            _through_s3_for(spec, readers),
        ),
    ]
    if writers:
        statements.append(
            statement(
                "DatasetWritersEncryptThroughS3",
                "Allow",
                WRITE_KEY_ACTIONS,
                ["*"],
                account_root(spec.accounts.compute),
                _through_s3_for(spec, writers),
            )
        )
    return document(*statements)
