"""`<name>-operator`: the role that may open SSM sessions on the cluster's nodes (perimeter.operator_roles); with
cluster.users, the Session document `<name>-RunShellAsUser` its sessions must name (each runs as its caller's own
account)."""

from __future__ import annotations

from aws_cdk import aws_iam as iam
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from policies.operator import (
    OPERATOR_POLICY_NAME,
    operator_session_policy,
    operator_trust_policy,
    run_as_document_content,
    run_as_document_name,
    runs_as_users,
)
from spec import DeploymentSpec
from spec.model import OPERATOR_ROLE
from stacks.nag.acknowledge import acknowledge, wildcard_resources


class OperatorRole(Construct):
    """Exactly policies.operator's trust and session policies, so the template and the policy tests agree."""

    def __init__(self, scope: Construct, construct_id: str, spec: DeploymentSpec) -> None:
        super().__init__(scope, construct_id)
        self.role = iam.Role(
            self,
            "Role",
            role_name=spec.role_name(OPERATOR_ROLE),
            assumed_by=iam.AccountPrincipal(spec.accounts.compute),
            description="SSM sessions on the cluster's nodes (the guardrail SCP's operator role); no dataset access",
        )
        role = self.role.node.default_child
        assert isinstance(role, iam.CfnRole)
        # Set on the L1 role (not as overrides) so that cdk-nag and checkov read the documents the template holds.
        role.assume_role_policy_document = operator_trust_policy(spec)
        session_policy = operator_session_policy(spec)
        role.policies = [iam.CfnRole.PolicyProperty(policy_name=OPERATOR_POLICY_NAME, policy_document=session_policy)]
        acknowledge(
            self.role,
            "IAM5",
            "Instances are matched by ParallelCluster's cluster-name tag (ssm:resourceTag), sessions by the caller's "
            "own id (the aws:ssmmessages:session-id tag), the cluster's stack by its name; the describe calls have no "
            "resource-level permissions.",
            applies_to=wildcard_resources(session_policy),
        )
        self.run_as_document: ssm.CfnDocument | None = None
        if runs_as_users(spec):
            self.run_as_document = ssm.CfnDocument(
                self,
                "RunAsShell",
                name=run_as_document_name(spec),
                document_type="Session",
                # CloudFormation's default, said outright: moto's emulator (the deploy rehearsal) refuses a document
                # without it ("Invalid document format None") and the identity stack would not come up there.
                document_format="JSON",
                content=run_as_document_content(spec),
                update_method="NewVersion",
            )
