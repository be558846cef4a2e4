"""One VPC-origin access point per dataset, with Block Public Access and a dataset-scoped policy."""

from __future__ import annotations

from aws_cdk import aws_s3 as s3
from constructs import Construct

from policies import access_point_policy
from spec import DatasetSpec, DeploymentSpec


class DatasetAccessPoint(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, spec: DeploymentSpec, dataset: DatasetSpec, bucket_name: str
    ) -> None:
        super().__init__(scope, construct_id)
        assert spec.network.vpc_id is not None  # the data stack is only built once the VPC id is known
        # Network origin and Block Public Access cannot change after creation: a change replaces the
        # access point, and its ARN stays the same because the name does.
        self.access_point = s3.CfnAccessPoint(
            self,
            "AccessPoint",
            bucket=bucket_name,
            name=dataset.access_point,
            vpc_configuration=s3.CfnAccessPoint.VpcConfigurationProperty(vpc_id=spec.network.vpc_id),
            public_access_block_configuration=s3.CfnAccessPoint.PublicAccessBlockConfigurationProperty(
                block_public_acls=True,
                block_public_policy=True,
                ignore_public_acls=True,
                restrict_public_buckets=True,
            ),
            policy=access_point_policy(spec, dataset),
        )
        self.arn = spec.access_point_arn(dataset)
