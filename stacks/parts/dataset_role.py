"""A compute-account role with a deterministic name and its half of the dataset grants."""

from __future__ import annotations

from aws_cdk import aws_iam as iam
from constructs import Construct

from policies import identity_policy
from spec import DeploymentSpec


class DatasetRole(Construct):
    """`<name>-<role>`: the data account's policies name it before it exists, by ARN pattern."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        spec: DeploymentSpec,
        role: str,
        assumed_by: iam.IPrincipal,
        description: str,
        with_instance_profile: bool,
        managed_policies: list[iam.IManagedPolicy] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.role = iam.Role(
            self,
            "Role",
            role_name=spec.role_name(role),
            assumed_by=assumed_by,
            description=description,
            managed_policies=managed_policies or [],
        )
        document = identity_policy(spec, role)
        if document is not None:
            # Exactly policies.identity_policy(spec, role), so tests and template agree.
            self.role.node.default_child.add_property_override(  # type: ignore[union-attr]
                "Policies", [{"PolicyName": "datasets", "PolicyDocument": document}]
            )
        self.instance_profile = (
            iam.InstanceProfile(self, "InstanceProfile", role=self.role, instance_profile_name=spec.role_name(role))
            if with_instance_profile
            else None
        )
