"""The operator role `<name>-operator`: the people who open SSM sessions on the cluster's nodes.

The guardrail SCP lets only `perimeter.operator_roles` start sessions on the compute account's instances, so the
administrator profile that deploys cannot; this role can, and nothing more: sessions on this cluster's nodes
(ParallelCluster tags each one with the cluster's name), the session documents the docs use, ending or resuming the
caller's own sessions, and the describe calls `aws ssm start-session` and `pcluster describe-cluster` make. No S3
and no KMS: the datasets stay with the node roles.

Trust: the compute account (its root), so the account's own IAM decides who may assume it, as it does for every
other permission there. With cluster.users declared, a session runs as the caller's own Linux account: Session
Manager's run-as (a session document of this deployment with runAsEnabled) takes the OS user from the principal tag
SSMSessionRunAs, which a caller may carry into this role as a session tag only with the value it already holds; the
default shell document (ssm-user, a sudoer) is not granted, and a session that names no document is refused
(ssm:SessionDocumentAccessCheck). The trust requires no MFA: a session that reaches it from IAM Identity Center or from
another role carries no MFA key, so the condition would lock those people out; enforce MFA where they sign in.
"""

from __future__ import annotations

from typing import Any

from policies.cluster_nodes import CLUSTER_TAG
from policies.documents import PolicyDocument, account_root, document, statement
from spec.model import DeploymentSpec
from spec.users import UNTAGGED_SESSION_USER

OPERATOR_POLICY_NAME = "sessions"
# The documents a session runs: Session Manager's default shell (the account's own, which it creates on first use)
# and AWS's port forwarding (docs/jobs.md forwards TensorBoard with it).
SHELL_DOCUMENT = "SSM-SessionManagerRunShell"
PORT_FORWARDING_DOCUMENT = "AWS-StartPortForwardingSession"
# Session Manager's run-as: the OS user a session runs as is the value of this tag on the principal (or its session).
RUN_AS_TAG = "SSMSessionRunAs"


def runs_as_users(spec: DeploymentSpec) -> bool:
    """cluster.users declared: each person's session runs as their own account."""
    return spec.cluster is not None and bool(spec.cluster.users)


def run_as_document_name(spec: DeploymentSpec) -> str:
    """A Session document of this deployment's (the account's SSM-SessionManagerRunShell may exist already)."""
    return f"{spec.name}-RunShellAsUser"


def run_as_document_content(spec: DeploymentSpec) -> dict[str, Any]:
    """Session preferences with run-as on (AWS's Session document schema 1.0, sessionType Standard_Stream)."""
    return {
        "schemaVersion": "1.0",
        "description": f"{spec.name}: a shell as the caller's own account (the {RUN_AS_TAG} tag), never ssm-user",
        "sessionType": "Standard_Stream",
        "inputs": {"runAsEnabled": True, "runAsDefaultUser": UNTAGGED_SESSION_USER, "idleSessionTimeout": "60"},
    }


def operator_trust_policy(spec: DeploymentSpec) -> PolicyDocument:
    trust = {"Sid": "ComputeAccountDecidesWho", "Effect": "Allow", "Principal": account_root(spec.accounts.compute)}
    if not runs_as_users(spec):
        return document({**trust, "Action": "sts:AssumeRole"})
    own_tag = {
        "Sid": "OwnRunAsTagOnly",
        "Effect": "Allow",
        "Principal": account_root(spec.accounts.compute),
        "Action": "sts:TagSession",
        "Condition": {
            "StringEquals": {f"aws:RequestTag/{RUN_AS_TAG}": f"${{aws:PrincipalTag/{RUN_AS_TAG}}}"},
            "ForAllValues:StringEquals": {"aws:TagKeys": [RUN_AS_TAG]},
        },
    }
    return document({**trust, "Action": "sts:AssumeRole"}, own_tag)


def operator_session_policy(spec: DeploymentSpec) -> PolicyDocument:
    region, account = spec.region, spec.accounts.compute
    cluster = spec.name  # cluster.config_builder.cluster_name: the ParallelCluster name, on every node's tag
    nodes: dict[str, dict[str, Any]] = {"StringEquals": {f"ssm:resourceTag/{CLUSTER_TAG}": cluster}}
    shell = SHELL_DOCUMENT
    if runs_as_users(spec):
        # A session naming no document gets the default shell only if the policy grants it (it does not).
        nodes["BoolIfExists"] = {"ssm:SessionDocumentAccessCheck": "true"}
        shell = run_as_document_name(spec)
    return document(
        statement(
            "SessionsOnThisClustersNodes",
            "Allow",
            ["ssm:StartSession"],
            [f"arn:aws:ec2:{region}:{account}:instance/*"],
            conditions=nodes,
        ),
        statement(
            "SessionDocuments",
            "Allow",
            ["ssm:StartSession"],
            [
                f"arn:aws:ssm:{region}:{account}:document/{shell}",
                f"arn:aws:ssm:{region}::document/{PORT_FORWARDING_DOCUMENT}",
            ],
        ),
        statement(
            "EndOrResumeOwnSessions",
            "Allow",
            ["ssm:TerminateSession", "ssm:ResumeSession"],
            [f"arn:aws:ssm:{region}:{account}:session/*"],
            # Session Manager tags each session with the id of the caller who started it.
            conditions={"StringLike": {"ssm:resourceTag/aws:ssmmessages:session-id": "${aws:userid}"}},
        ),
        statement(
            # Describe calls have no resource-level permissions: finding the head node, a session's state.
            "FindNodesAndSessions",
            "Allow",
            [
                "ec2:DescribeInstances",
                "ssm:DescribeInstanceInformation",
                "ssm:DescribeSessions",
                "ssm:GetConnectionStatus",
            ],
            ["*"],
        ),
        statement(
            # pcluster describe-cluster / describe-compute-fleet: the cluster's stack and its status table.
            "ClusterStatus",
            "Allow",
            ["cloudformation:DescribeStacks", "cloudformation:DescribeStackEvents", "dynamodb:GetItem"],
            [
                f"arn:aws:cloudformation:{region}:{account}:stack/{cluster}/*",
                f"arn:aws:dynamodb:{region}:{account}:table/parallelcluster-{cluster}",
            ],
        ),
    )
