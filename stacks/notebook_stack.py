"""Compute account, optional: the SageMaker notebook."""

from __future__ import annotations

from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from spec import DeploymentSpec
from stacks.parts.notebook import SecureNotebook


class NotebookStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        spec: DeploymentSpec,
        subnet: ec2.ISubnet,
        security_group: ec2.ISecurityGroup,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.notebook = SecureNotebook(self, "Notebook", spec, subnet, security_group)
