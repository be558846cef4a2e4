"""Who may read the Slurm accounting database's password: the head node, through the VPC, and nobody else.

ParallelCluster's head node reads the secret named in SlurmSettings.Database.PasswordSecretArn with
secretsmanager:GetSecretValue when it configures slurmdbd (its own node policy builder grants exactly that;
cluster/verify/runtime_contract.py checks it). The secret has a fixed name, so the head node's role and the
Secrets Manager endpoint's policy can name it without a cross-stack reference; Secrets Manager appends six
random characters to the name in the ARN. The secret is encrypted with its own KMS key, which Secrets Manager
uses on the caller's behalf: the role may decrypt only through Secrets Manager, only for this secret.
"""

from __future__ import annotations

from policies.documents import PolicyDocument, Statement, document, statement
from spec.model import DeploymentSpec


def accounting_secret_name(spec: DeploymentSpec) -> str:
    return f"{spec.name}/slurm-accounting-db"


def accounting_secret_arn(spec: DeploymentSpec, suffix: str = "??????") -> str:
    """The secret's ARN: a pattern by default (IAM wildcards), a concrete one with a six-character suffix."""
    return (
        f"arn:aws:secretsmanager:{spec.region}:{spec.accounts.compute}:secret:{accounting_secret_name(spec)}-{suffix}"
    )


def accounting_enabled(spec: DeploymentSpec) -> bool:
    return spec.cluster is not None and spec.cluster.accounting.enabled


def head_node_accounting_statements(spec: DeploymentSpec) -> list[Statement]:
    """The head node reads the database password (and decrypts it through Secrets Manager only)."""
    if not accounting_enabled(spec):
        return []
    secret = accounting_secret_arn(spec)
    return [
        statement("ReadAccountingDatabasePassword", "Allow", ["secretsmanager:GetSecretValue"], [secret]),
        statement(
            "DecryptAccountingPasswordThroughSecretsManager",
            "Allow",
            ["kms:Decrypt"],
            [f"arn:aws:kms:{spec.region}:{spec.accounts.compute}:key/*"],
            conditions={
                "StringEquals": {"kms:ViaService": f"secretsmanager.{spec.region}.amazonaws.com"},
                "StringLike": {"kms:EncryptionContext:SecretARN": secret},
            },
        ),
    ]


def secretsmanager_endpoint_policy(spec: DeploymentSpec) -> PolicyDocument:
    """The Secrets Manager endpoint carries one call: our head node reading the accounting password."""
    return document(
        statement(
            "HeadNodeReadsTheAccountingPassword",
            "Allow",
            ["secretsmanager:GetSecretValue"],
            [accounting_secret_arn(spec)],
            "*",
            {"StringEquals": {"aws:PrincipalArn": spec.role_arn("head-node")}},
        )
    )
