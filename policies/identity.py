"""Identity policies of the compute account's roles: their half of each cross-account grant."""

from __future__ import annotations

from policies.documents import (
    LIST_ACTIONS,
    READ_OBJECT_ACTIONS,
    WRITE_OBJECT_ACTIONS,
    PolicyDocument,
    Statement,
    document,
    object_arns,
    statement,
)
from policies.kms import READ_KEY_ACTIONS, WRITE_KEY_ACTIONS
from spec.model import DeploymentSpec


def _sid_part(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("-"))


def key_resource_and_conditions(spec: DeploymentSpec) -> tuple[str, dict[str, dict[str, object]]]:
    """The dataset key as the compute side can name it.

    A key this repo manages gets its ARN only at deploy time, in the other account; its alias is
    deterministic, so the identity policy names the data account's keys and pins the alias.
    """
    via_s3: dict[str, dict[str, object]] = {"StringEquals": {"kms:ViaService": spec.s3_service_principal_for_kms}}
    if spec.data.encryption.kms_key_arn is not None:
        return spec.data.encryption.kms_key_arn, via_s3
    via_s3["ForAnyValue:StringEquals"] = {"kms:ResourceAliases": spec.kms_key_alias}
    return f"arn:aws:kms:{spec.region}:{spec.accounts.data}:key/*", via_s3


def identity_policy(spec: DeploymentSpec, role: str) -> PolicyDocument | None:
    """The dataset permissions of one reader/writer (a built-in role name or a role ARN); None if it has none."""
    reads = spec.datasets_readable_by(role)
    writes = spec.datasets_writable_by(role)
    if not reads and not writes:
        return None
    statements: list[Statement] = []
    for dataset in reads:
        ap = spec.access_point_arn(dataset)
        part = _sid_part(dataset.name)
        statements.append(statement(f"Read{part}", "Allow", READ_OBJECT_ACTIONS, [object_arns(ap, dataset.prefix)]))
        statements.append(
            statement(
                f"List{part}",
                "Allow",
                LIST_ACTIONS,
                [ap],
                conditions={"StringLike": {"s3:prefix": f"{dataset.prefix}*"}},
            )
        )
    for dataset in writes:
        assert dataset.output_prefix is not None
        ap = spec.access_point_arn(dataset)
        statements.append(
            statement(
                f"Write{_sid_part(dataset.name)}",
                "Allow",
                WRITE_OBJECT_ACTIONS,
                [object_arns(ap, dataset.output_prefix)],
            )
        )
    key, conditions = key_resource_and_conditions(spec)
    key_actions = list(dict.fromkeys([*READ_KEY_ACTIONS, *(WRITE_KEY_ACTIONS if writes else ())]))
    statements.append(statement("UseDatasetKeyThroughS3", "Allow", key_actions, [key], conditions=conditions))
    return document(*statements)
