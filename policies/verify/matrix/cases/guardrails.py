"""Guardrail cases: what the guardrail SCP refuses whoever asks."""

from __future__ import annotations

from policies.guardrails import GUARDRAIL_POLICY_ID
from policies.verify.harness.layers import (
    SCP,
)
from policies.verify.harness.model import (
    ApiRequest,
    Principal,
)
from policies.verify.matrix.model import Case, explicit
from spec import DeploymentSpec


def guardrail_cases(spec: DeploymentSpec, policies_present: frozenset[str]) -> list[Case]:
    """The guardrail SCP (policies.guardrails), as the organization's principals meet it."""
    if GUARDRAIL_POLICY_ID not in policies_present:
        return []
    org, region, compute, data = spec.organization_id, spec.region, spec.accounts.compute, spec.accounts.data
    data_admin = Principal("data-account administrator", f"arn:aws:iam::{data}:role/storage-admin", org)
    access_point = f"arn:aws:s3:{region}:{data}:accesspoint/new-dataset"

    def create(origin: str) -> ApiRequest:
        return ApiRequest(
            data_admin,
            "s3:CreateAccessPoint",
            access_point,
            data,
            None,
            "accesspoint",
            (("s3:AccessPointNetworkOrigin", origin),),
        )

    cases = [
        Case(
            "guardrail-create-vpc-access-point",
            "guardrails",
            "the data account's administrator creates a VPC-origin access point",
            create("VPC"),
            {},
            why="new datasets stay possible, VPC-only",
        ),
        Case(
            "guardrail-create-internet-access-point",
            "guardrails",
            "the data account's administrator creates an Internet-origin access point",
            create("Internet"),
            explicit(SCP, "DenyAccessPointsOutsideVpc"),
            why="no access point that the Internet can reach, on any bucket of the organization",
        ),
    ]
    instance = f"arn:aws:ec2:{region}:{compute}:instance/i-0123456789abcdef0"
    if spec.perimeter.operator_roles:
        node = Principal("cluster node credentials", spec.role_arn("cluster-node"), org)
        cases.append(
            Case(
                "guardrail-session-by-non-operator",
                "guardrails",
                "a role that is not an operator (the nodes' own credentials) opens an SSM session on a node",
                ApiRequest(node, "ssm:StartSession", instance, compute, "ssm", "instance"),
                explicit(SCP, "DenySessionsOnInstancesExceptOperators"),
                why="a session is a shell inside the VPC with the node's credentials",
            )
        )
    if spec.notebook.enabled and spec.network.vpc_id is not None:
        operator = Principal(
            "an operator, outside the VPC",
            spec.perimeter.operator_roles[0] if spec.perimeter.operator_roles else f"arn:aws:iam::{compute}:role/ops",
            org,
        )
        notebook = f"arn:aws:sagemaker:{region}:{compute}:notebook-instance/{spec.name}"
        cases.append(
            Case(
                "guardrail-presigned-url-outside-vpc",
                "guardrails",
                "an operator asks for a presigned notebook URL from outside the VPC",
                ApiRequest(
                    operator,
                    "sagemaker:CreatePresignedNotebookInstanceUrl",
                    notebook,
                    compute,
                    None,
                    "notebook-instance",
                ),
                explicit(SCP, "DenyPresignedNotebookUrlsOutsideVpc"),
                why="the URL opens Jupyter (and the notebook role) from any browser that holds it",
            )
        )
    return cases
