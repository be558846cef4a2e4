"""Policies of the compute VPC's interface endpoints: the organization's principals, the organization's
resources, and the few AWS-owned resources the nodes need.

An interface endpoint keeps the allow-all default unless it is given a policy; then code in the VPC with
its own credentials (or ours) can move data to any account through CloudWatch Logs, an ECR push, a role
of another account (STS) or a stack of another account. Each policy here admits, in the manner of
aws-samples/data-perimeter-policy-examples:

- principals of the organization calling resources of the organization (aws:PrincipalOrgID and
  aws:ResourceOrgID; the two accounts when the spec is not organization-bound);
- AWS service principals, which act on the caller's behalf (aws:PrincipalIsAWSService);
- per service, what the nodes need outside the organization: Amazon-owned AMIs (ec2:Owner);
- STS: only our own roles may be assumed (sts:GetCallerIdentity needs no permission and no policy can
  deny it, so it is not listed).
Services whose endpoints take no policy are listed with what covers them instead.
"""

from __future__ import annotations

from policies.accounting import accounting_enabled, secretsmanager_endpoint_policy
from policies.documents import PolicyDocument, Statement, document, statement
from spec.model import DeploymentSpec

# Interface endpoints every node needs without internet, and why.
BASE_INTERFACE_ENDPOINTS: dict[str, str] = {
    "ssm": "Session Manager and Run Command (the way in; no SSH, no bastion)",
    "ssmmessages": "Session Manager data channel",
    "ec2messages": "Run Command message delivery",
    "logs": "CloudWatch Logs (ParallelCluster and job logs)",
    "monitoring": "CloudWatch metrics from the nodes",
    "sts": "role credentials for the SDKs",
    "kms": "KMS for encrypted volumes and dataset keys",
    "ecr.api": "ECR authorization for container pulls",
    "ecr.dkr": "ECR registry for container pulls (pyxis/enroot)",
    "cloudformation": "ParallelCluster's node bootstrap reads the cluster stack",
    "ec2": "ParallelCluster's node daemons launch and describe instances",
}
# With cluster.accounting: the head node reads the database password when it configures slurmdbd.
ACCOUNTING_INTERFACE_ENDPOINTS: dict[str, str] = {
    "secretsmanager": "the Slurm accounting database's password (head node only; policies.accounting)",
}
NOTEBOOK_INTERFACE_ENDPOINTS: dict[str, str] = {
    "sagemaker.api": "SageMaker API from the notebook",
    "notebook": "SageMaker notebook UI (aws.sagemaker.<region>.notebook)",
}


def wanted_interface_endpoints(spec: DeploymentSpec) -> list[str]:
    """The interface endpoints the spec's VPC gets, by service name."""
    wanted = list(BASE_INTERFACE_ENDPOINTS)
    if accounting_enabled(spec):
        wanted += list(ACCOUNTING_INTERFACE_ENDPOINTS)
    if spec.notebook.enabled:
        wanted += list(NOTEBOOK_INTERFACE_ENDPOINTS)
    return wanted


# The endpoint policy's principal: the plain "*" (see policies.endpoint for why not {"AWS": "*"}).
ANY = "*"

# Interface endpoints that accept no endpoint policy (describe-vpc-endpoint-services reports
# VpcEndpointPolicySupported false), and what closes them instead.
POLICYLESS: dict[str, str] = {
    "ssmmessages": "carries only the data channel of sessions the ssm endpoint (with a policy) and the guardrail "
    "SCP allowed to start",
    "ec2messages": "carries only Run Command messages for commands sent through the ssm endpoint (with a policy)",
    "notebook": "serves only the notebook's Jupyter UI, opened by a presigned URL that the guardrail SCP limits "
    "to the sagemaker.api endpoint",
}


def org_conditions(spec: DeploymentSpec, *, resource: bool) -> dict[str, dict[str, object]]:
    """Who (and, with `resource`, whose resources) the perimeter admits."""
    if spec.perimeter.organization_bound:
        assert spec.organization_id is not None  # the spec checks guarantee it
        keys: dict[str, object] = {"aws:PrincipalOrgID": spec.organization_id}
        if resource:
            keys["aws:ResourceOrgID"] = spec.organization_id
        return {"StringEquals": keys}
    accounts = [spec.accounts.compute, spec.accounts.data]
    keys = {"aws:PrincipalAccount": accounts}
    if resource:
        keys["aws:ResourceAccount"] = accounts
    return {"StringEquals": keys}


def _base(spec: DeploymentSpec, actions: list[str] | None = None) -> list[Statement]:
    return [
        statement(
            "OrgPrincipalsToOrgResources",
            "Allow",
            actions or ["*"],
            ["*"],
            ANY,
            org_conditions(spec, resource=True),
        ),
        statement(
            "AwsServicePrincipalsOnOurBehalf",
            "Allow",
            ["*"],
            ["*"],
            ANY,
            {"Bool": {"aws:PrincipalIsAWSService": "true"}},
        ),
    ]


def _service_specific(spec: DeploymentSpec, service: str) -> list[Statement]:
    compute = spec.accounts.compute
    who = org_conditions(spec, resource=False)
    if service == "ec2":
        # ParallelCluster launches its official AMIs, which Amazon owns (no organization to match).
        conditions = {"StringEquals": {**who["StringEquals"], "ec2:Owner": "amazon"}}
        return [
            statement(
                "OrgPrincipalsLaunchAmazonImages",
                "Allow",
                ["ec2:RunInstances", "ec2:CreateFleet"],
                ["*"],
                ANY,
                conditions,
            )
        ]
    if service == "sts":
        return [
            statement(
                "OrgPrincipalsAssumeOurRolesOnly",
                "Allow",
                ["sts:AssumeRole", "sts:TagSession"],
                [f"arn:aws:iam::{compute}:role/{spec.name}-*"],
                ANY,
                who,
            ),
        ]
    return []


def interface_endpoint_policy(spec: DeploymentSpec, service: str) -> PolicyDocument | None:
    """The policy of the interface endpoint for `service` ("logs", "ecr.api", ...); None if it takes none."""
    if service in POLICYLESS:
        return None
    if service == "secretsmanager":
        # One secret, one reader: nothing else in the VPC has a reason to reach Secrets Manager.
        return secretsmanager_endpoint_policy(spec)
    if service == "sts":
        # Assuming a role is the one call whose resource (another account's role) is itself a way out:
        # only our roles, whatever the organization holds.
        return document(*_base(spec)[1:], *_service_specific(spec, service))
    return document(*_base(spec), *_service_specific(spec, service))
