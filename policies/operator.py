"""The operator role `<name>-operator`: the people who open SSM sessions on the cluster's nodes.

The guardrail SCP lets only `perimeter.operator_roles` start sessions on the compute account's instances, so the
administrator profile that deploys cannot; this role can, and nothing more: sessions on this cluster's nodes
(ParallelCluster tags each one with the cluster's name), the session documents the docs use, ending or resuming the
caller's own sessions, and the describe calls `aws ssm start-session` and `pcluster describe-cluster` make. No S3
and no KMS: the datasets stay with the node roles.

Trust: the compute account (its root), so the account's own IAM decides who may assume it, as it does for every
other permission there. The trust requires no MFA: a session that reaches it from IAM Identity Center or from
another role carries no MFA key, so the condition would lock those people out; enforce MFA where they sign in.
"""

from __future__ import annotations

from policies.cluster_nodes import CLUSTER_TAG
from policies.documents import PolicyDocument, account_root, document, statement
from spec.model import DeploymentSpec

OPERATOR_POLICY_NAME = "sessions"
# The documents a session runs: Session Manager's default shell (the account's own, which it creates on first use)
# and AWS's port forwarding (docs/jobs.md forwards TensorBoard with it).
SHELL_DOCUMENT = "SSM-SessionManagerRunShell"
PORT_FORWARDING_DOCUMENT = "AWS-StartPortForwardingSession"


def operator_trust_policy(spec: DeploymentSpec) -> PolicyDocument:
    trust = {"Sid": "ComputeAccountDecidesWho", "Effect": "Allow", "Principal": account_root(spec.accounts.compute)}
    return document({**trust, "Action": "sts:AssumeRole"})


def operator_session_policy(spec: DeploymentSpec) -> PolicyDocument:
    region, account = spec.region, spec.accounts.compute
    cluster = spec.name  # cluster.config_builder.cluster_name: the ParallelCluster name, on every node's tag
    return document(
        statement(
            "SessionsOnThisClustersNodes",
            "Allow",
            ["ssm:StartSession"],
            [f"arn:aws:ec2:{region}:{account}:instance/*"],
            conditions={"StringEquals": {f"ssm:resourceTag/{CLUSTER_TAG}": cluster}},
        ),
        statement(
            "SessionDocuments",
            "Allow",
            ["ssm:StartSession"],
            [
                f"arn:aws:ssm:{region}:{account}:document/{SHELL_DOCUMENT}",
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
