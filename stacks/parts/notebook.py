"""A SageMaker notebook that lives in the VPC only: no direct internet, no root, encrypted, IMDSv2."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from spec import DeploymentSpec


class SecureNotebook(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        spec: DeploymentSpec,
        subnet: ec2.ISubnet,
        security_group: ec2.ISecurityGroup,
    ) -> None:
        super().__init__(scope, construct_id)
        self.volume_key = kms.Key(
            self,
            "VolumeKey",
            description=f"{spec.name}: notebook storage volume",
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.notebook = sagemaker.CfnNotebookInstance(
            self,
            "Notebook",
            notebook_instance_name=f"{spec.name}-notebook",
            instance_type=spec.notebook.instance_type,
            # By name, not by reference: the role lives in the identity stack, and a name keeps the
            # two stacks free of exports.
            role_arn=spec.role_arn("notebook"),
            subnet_id=subnet.subnet_id,
            security_group_ids=[security_group.security_group_id],
            direct_internet_access="Disabled",
            # Lifecycle configurations still run as root; users do not.
            root_access="Disabled",
            kms_key_id=self.volume_key.key_id,
            volume_size_in_gb=spec.notebook.volume_size_gb,
            platform_identifier="notebook-al2-v3",
            instance_metadata_service_configuration=sagemaker.CfnNotebookInstance.InstanceMetadataServiceConfigurationProperty(
                minimum_instance_metadata_service_version="2"
            ),
        )
