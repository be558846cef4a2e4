"""The KMS key that encrypts the datasets (data account), or the one the spec brings."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_kms as kms
from constructs import Construct

from policies import key_policy
from spec import DeploymentSpec


class DatasetKey(Construct):
    """A rotating key whose policy is exactly policies.key_policy(spec); or the spec's own key."""

    def __init__(self, scope: Construct, construct_id: str, spec: DeploymentSpec) -> None:
        super().__init__(scope, construct_id)
        given = spec.data.encryption.kms_key_arn
        if given is not None:
            # The key's policy is the owner's to manage; docs/security.md lists the statements it needs.
            self.key: kms.IKey = kms.Key.from_key_arn(self, "Key", given)
            return
        key = kms.Key(
            self,
            "Key",
            alias=spec.kms_key_alias,
            description=f"{spec.name}: encrypts the training datasets in {spec.data.bucket_name}",
            enable_key_rotation=True,
            # Losing the key loses every object it encrypted.
            removal_policy=RemovalPolicy.RETAIN,
        )
        # Replace CDK's generated policy with ours, byte for byte, so tests and template agree; set as the
        # property (not an override) so that rule packs inspecting the resource see it.
        key.node.default_child.key_policy = key_policy(spec)  # type: ignore[union-attr]
        self.key = key
