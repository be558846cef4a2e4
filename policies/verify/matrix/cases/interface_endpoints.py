"""Interface endpoint cases: the calls the nodes make through each endpoint, and those its policy refuses."""

from __future__ import annotations

from dataclasses import dataclass

from policies.verify.harness.layers import (
    INTERFACE_ENDPOINT,
)
from policies.verify.harness.model import (
    ApiRequest,
    Principal,
)
from policies.verify.matrix.model import OTHER_ORG_ACCOUNT, OTHER_ORG_ID, OUTSIDE_ACCOUNT, Case, implicit
from spec import DeploymentSpec


@dataclass(frozen=True)
class _Call:
    """One call through an interface endpoint: what the nodes do (allowed) or a way out (denied)."""

    label: str
    action: str
    resource: str
    account: str | None
    resource_type: str | None
    allowed: bool
    context: tuple[tuple[str, str], ...] = ()
    caller: str = "node"  # node, operator


def _endpoint_calls(spec: DeploymentSpec) -> dict[str, list[_Call]]:
    """Per interface endpoint with a policy: the calls the platform needs, and the ways out that must fail."""
    region, compute, data, out = spec.region, spec.accounts.compute, spec.accounts.data, OUTSIDE_ACCOUNT
    log_stream = "log-group:/aws/parallelcluster/{name}:log-stream:head-node"
    cluster_stack = f"arn:aws:cloudformation:{region}:{{account}}:stack/{spec.name}-cluster/0a1b2c3d"
    notebook = f"arn:aws:sagemaker:{region}:{{account}}:notebook-instance/{spec.name}"
    calls: dict[str, list[_Call]] = {
        "logs": [
            _Call(
                "puts its log events",
                "logs:PutLogEvents",
                f"arn:aws:logs:{region}:{compute}:" + log_stream.format(name=spec.name),
                compute,
                "log-stream",
                True,
            ),
            _Call(
                f"writes log events into a log group of account {out}",
                "logs:PutLogEvents",
                f"arn:aws:logs:{region}:{out}:" + log_stream.format(name="drop"),
                out,
                "log-stream",
                False,
            ),
        ],
        "monitoring": [
            _Call("publishes metrics", "cloudwatch:PutMetricData", "*", compute, None, True),
            _Call(
                "reads the cluster's CloudWatch dashboard",
                "cloudwatch:GetDashboard",
                f"arn:aws:cloudwatch::{compute}:dashboard/{spec.name}-cluster-{region}",
                compute,
                "dashboard",
                True,
            ),
            _Call(
                f"reads a dashboard of account {out}",
                "cloudwatch:GetDashboard",
                f"arn:aws:cloudwatch::{out}:dashboard/drop",
                out,
                "dashboard",
                False,
            ),
        ],
        "sts": [
            _Call(
                "assumes a role of this deployment",
                "sts:AssumeRole",
                spec.role_arn("head-node"),
                compute,
                "role",
                True,
            ),
            _Call(
                f"assumes a role of account {out}",
                "sts:AssumeRole",
                f"arn:aws:iam::{out}:role/drop",
                out,
                "role",
                False,
            ),
            _Call(
                "assumes another role of the organization",
                "sts:AssumeRole",
                f"arn:aws:iam::{compute}:role/ops-admin",
                compute,
                "role",
                False,
            ),
        ],
        "kms": [
            _Call(
                "decrypts with a key of the data account",
                "kms:Decrypt",
                f"arn:aws:kms:{region}:{data}:key/0a0a0a0a-1b1b-2c2c-3d3d-4e4e4e4e4e4e",
                data,
                "key",
                True,
            ),
            _Call(
                f"encrypts with a key of account {out}",
                "kms:Encrypt",
                f"arn:aws:kms:{region}:{out}:key/5f5f5f5f-6a6a-7b7b-8c8c-9d9d9d9d9d9d",
                out,
                "key",
                False,
            ),
        ],
        "ecr.api": [
            _Call("gets an ECR authorization token", "ecr:GetAuthorizationToken", "*", compute, None, True),
            _Call(
                "reads the manifest of the compute account's NeMo image",
                "ecr:BatchGetImage",
                f"arn:aws:ecr:{region}:{compute}:repository/{spec.name}/nemo",
                compute,
                "repository",
                True,
            ),
            _Call(
                f"pulls an image manifest from a repository of account {out}",
                "ecr:BatchGetImage",
                f"arn:aws:ecr:{region}:{out}:repository/tools",
                out,
                "repository",
                False,
            ),
        ],
        "ecr.dkr": [
            _Call(
                "pulls a layer of the compute account's NeMo image",
                "ecr:GetDownloadUrlForLayer",
                f"arn:aws:ecr:{region}:{compute}:repository/{spec.name}/nemo",
                compute,
                "repository",
                True,
            ),
            _Call(
                f"pushes a layer to a repository of account {out}",
                "ecr:InitiateLayerUpload",
                f"arn:aws:ecr:{region}:{out}:repository/drop",
                out,
                "repository",
                False,
            ),
        ],
        "cloudformation": [
            _Call(
                "signals its cluster stack",
                "cloudformation:SignalResource",
                cluster_stack.format(account=compute),
                compute,
                "stack",
                True,
            ),
            _Call(
                f"creates a stack in account {out} (data in its parameters)",
                "cloudformation:CreateStack",
                cluster_stack.format(account=out),
                out,
                "stack",
                False,
            ),
        ],
        "ec2": [
            _Call(
                "terminates a compute node of the cluster",
                "ec2:TerminateInstances",
                f"arn:aws:ec2:{region}:{compute}:instance/i-0123456789abcdef0",
                compute,
                "instance",
                True,
            ),
            _Call(
                "launches an Amazon-owned ParallelCluster AMI",
                "ec2:RunInstances",
                f"arn:aws:ec2:{region}::image/ami-0123456789abcdef0",
                None,
                "image",
                True,
                (("ec2:Owner", "amazon"),),
            ),
            _Call(
                f"launches an AMI of account {out}",
                "ec2:RunInstances",
                f"arn:aws:ec2:{region}::image/ami-0fedcba9876543210",
                out,
                "image",
                False,
                (("ec2:Owner", out),),
            ),
        ],
        "ssm": [
            _Call(
                "opens a session on a node (operator)",
                "ssm:StartSession",
                f"arn:aws:ec2:{region}:{compute}:instance/i-0123456789abcdef0",
                compute,
                "instance",
                True,
                caller="operator",
            ),
            _Call(
                f"reads an SSM document of account {out}",
                "ssm:GetDocument",
                f"arn:aws:ssm:{region}:{out}:document/payload",
                out,
                "document",
                False,
            ),
        ],
    }
    if spec.notebook.enabled:
        calls["sagemaker.api"] = [
            _Call(
                "opens the notebook (presigned URL)",
                "sagemaker:CreatePresignedNotebookInstanceUrl",
                notebook.format(account=compute),
                compute,
                "notebook-instance",
                True,
                caller="operator",
            ),
            _Call(
                f"opens a notebook of account {out}",
                "sagemaker:CreatePresignedNotebookInstanceUrl",
                notebook.format(account=out),
                out,
                "notebook-instance",
                False,
            ),
        ]
    return calls


def _slug(text: str) -> str:
    return "-".join("".join(c if c.isalnum() else " " for c in text.lower()).split())


def interface_endpoint_cases(spec: DeploymentSpec, policies_present: frozenset[str]) -> list[Case]:
    """Through each interface endpoint with a policy: the platform's calls pass, the ways out do not, credentials
    of another organization do not, and AWS service principals acting for us do."""
    org = spec.organization_id
    node = Principal("cluster node (endpoint layer only)", spec.role_arn("cluster-node"), org)
    operator_arn = (
        spec.perimeter.operator_roles[0]
        if spec.perimeter.operator_roles
        else f"arn:aws:iam::{spec.accounts.compute}:role/{spec.name}-operator"
    )
    operator = Principal("operator role (endpoint layer only)", operator_arn, org)
    intruder = Principal("other organization's role", f"arn:aws:iam::{OTHER_ORG_ACCOUNT}:role/intruder", OTHER_ORG_ID)
    service_principal = Principal("an AWS service principal", "ec2.amazonaws.com", None, is_aws_service=True)
    cases: list[Case] = []
    for service, calls in _endpoint_calls(spec).items():
        if f"endpoint:{service}" not in policies_present:
            continue
        for index, call in enumerate(calls):
            who = operator if call.caller == "operator" else node

            def request(principal: Principal, call: _Call = call, service: str = service) -> ApiRequest:
                # An action without resource types acts in the caller's own account.
                account = principal.account if call.resource == "*" and principal.account else call.account
                return ApiRequest(
                    principal, call.action, call.resource, account, service, call.resource_type, call.context
                )

            slug = f"{service}/{_slug(call.label)}"
            cases.append(
                Case(
                    f"endpoint/{slug}",
                    "endpoints",
                    f"{who.label.split(' (')[0]} {call.label} through the {service} endpoint",
                    request(who),
                    {} if call.allowed else implicit(INTERFACE_ENDPOINT),
                    why="what the platform needs" if call.allowed else "a way out of the organization",
                )
            )
            if call.allowed:
                cases.append(
                    Case(
                        f"endpoint-outside-credentials/{slug}",
                        "endpoints",
                        f"credentials of another organization: {call.label} through the {service} endpoint",
                        request(intruder),
                        implicit(INTERFACE_ENDPOINT),
                        why="only the organization's principals use the VPC's endpoints",
                    )
                )
            if index == 0:
                cases.append(
                    Case(
                        f"endpoint-aws-service/{service}",
                        "endpoints",
                        f"an AWS service principal, acting for us: {call.label} through the {service} endpoint",
                        request(service_principal),
                        {},
                        why="services that act on the caller's behalf carry no organization id",
                    )
                )
    return cases
