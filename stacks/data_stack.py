"""Data account: the key, the bucket, and one VPC-only access point per dataset."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Stack
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
        CfnOutput(self, "BucketName", value=storage.bucket.bucket_name)
        CfnOutput(self, "KeyArn", value=key.key.key_arn)
