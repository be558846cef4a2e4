"""Access point policy: readers Get/List under the dataset prefix, writers Put under the output prefix.

Principals are named as the compute account's root plus an aws:PrincipalArn match: S3 rejects a
policy naming a role that does not exist yet (so the accounts could not deploy in either order),
and a role recreated under the same name would silently lose access if its ARN were the principal.
"""

from __future__ import annotations

from policies.documents import (
    LIST_ACTIONS,
    READ_OBJECT_ACTIONS,
    WRITE_OBJECT_ACTIONS,
    PolicyDocument,
    Statement,
    account_root,
    document,
    object_arns,
    one_or_list,
    statement,
)
from spec.model import DatasetSpec, DeploymentSpec


def _caller_conditions(spec: DeploymentSpec, roles: list[str]) -> dict[str, dict[str, object]]:
    network: dict[str, object]
    if spec.network.s3_gateway_endpoint_id is not None:
        # Only through the gateway endpoint whose policy we wrote, not through a second S3 endpoint (an
        # interface endpoint with the default policy) someone adds to the VPC. It implies VPC origin.
        network = {"aws:SourceVpce": spec.network.s3_gateway_endpoint_id}
    else:
        # The access point is VPC-only already; the condition makes the policy say so on its own.
        network = {"s3:AccessPointNetworkOrigin": "VPC"}
    return {
        "ArnLike": {"aws:PrincipalArn": one_or_list([spec.role_arn(r) for r in roles])},
        "StringEquals": network,
    }


def access_point_policy(spec: DeploymentSpec, dataset: DatasetSpec) -> PolicyDocument:
    ap_arn = spec.access_point_arn(dataset)
    principal = account_root(spec.accounts.compute)
    statements: list[Statement] = []
    if dataset.readers:
        statements.append(
            statement(
                "ReadersGetUnderDatasetPrefix",
                "Allow",
                READ_OBJECT_ACTIONS,
                [object_arns(ap_arn, dataset.prefix)],
                principal,
                _caller_conditions(spec, dataset.readers),
            )
        )
        list_conditions = _caller_conditions(spec, dataset.readers)
        list_conditions["StringLike"] = {"s3:prefix": f"{dataset.prefix}*"}
        statements.append(
            statement("ReadersListUnderDatasetPrefix", "Allow", LIST_ACTIONS, [ap_arn], principal, list_conditions)
        )
    if dataset.writers:
        assert dataset.output_prefix is not None  # the spec checks guarantee it
        statements.append(
            statement(
                "WritersPutUnderOutputPrefix",
                "Allow",
                WRITE_OBJECT_ACTIONS,
                [object_arns(ap_arn, dataset.output_prefix)],
                principal,
                _caller_conditions(spec, dataset.writers),
            )
        )
    return document(*statements)
