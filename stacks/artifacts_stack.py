"""Compute account: the artifacts bucket the nodes install from (wheelhouse, exporters' binaries, NxDT stack).

Deployed before the cluster, and filled by `make upload-artifacts` in between (README, Deploying for real)."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from spec import DeploymentSpec
from spec.artifacts import artifact_locations
from stacks.parts.artifacts_bucket import ArtifactsBucket

BUCKET_NAME_OUTPUT = "ArtifactsBucketName"


class ArtifactsStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, spec: DeploymentSpec, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.artifacts = ArtifactsBucket(self, "ArtifactsBucket", spec)
        CfnOutput(self, BUCKET_NAME_OUTPUT, value=self.artifacts.bucket.bucket_name)
        locations = artifact_locations(spec)
        for output, folder in (
            ("PythonWheelhouse", locations.python_wheelhouse),
            ("NxdtWheelhouse", locations.nxdt_wheelhouse),
        ):
            if folder is not None:
                CfnOutput(self, output, value=folder.uri, description="make upload-artifacts uploads here")
