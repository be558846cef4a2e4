"""Data account: the key, the bucket, and one VPC-only access point per dataset."""

from __future__ import annotations

from typing import Any

from aws_cdk import Annotations, CfnOutput, Stack
from constructs import Construct

from spec import DeploymentSpec
from stacks.parts.dataset_access_point import DatasetAccessPoint
from stacks.parts.dataset_bucket import DatasetBucket
from stacks.parts.dataset_key import DatasetKey


class DataStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, spec: DeploymentSpec, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        key = DatasetKey(self, "DatasetKey", spec)
        storage = DatasetBucket(self, "DatasetBucket", spec, key.key)
        for dataset in spec.data.datasets:
            access_point = DatasetAccessPoint(
                self, f"AccessPoint-{dataset.name}", spec, dataset, storage.bucket.bucket_name
            )
            access_point.node.add_dependency(storage.policy)
            CfnOutput(self, f"AccessPointArn{dataset.name.title().replace('-', '')}", value=access_point.arn)
        if spec.network.s3_gateway_endpoint_id is None:
            # The same two-phase step as network.vpc_id; until then the access points accept any S3 endpoint
            # of the VPC, including one without our endpoint policy.
            Annotations.of(self).add_warning_v2(
                "llm:access-points-without-source-vpce",
                "network.s3_gateway_endpoint_id is unset: once it is set (the network stack's S3GatewayEndpointId "
                "output), every access point statement also requires StringEquals aws:SourceVpce = that endpoint",
            )
        CfnOutput(self, "BucketName", value=storage.bucket.bucket_name)
        CfnOutput(self, "KeyArn", value=key.key.key_arn)
