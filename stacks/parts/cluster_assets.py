"""Bootstrap scripts and the head node's payload as CDK assets: versioned with the repo, never fetched
from a moving branch. The payload's URI also goes into an SSM parameter whose name never changes: the
head node's OnNodeConfigured names that stable key (see cluster.config_builder.ClusterRefs)."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from cluster.payload import build_payload, deployment_yaml
from policies.cluster_nodes import payload_parameter_name
from spec import DeploymentSpec

REPO = Path(__file__).resolve().parents[2]
BOOTSTRAP = REPO / "cluster" / "bootstrap"
SCRIPTS = ("head_node.sh", "gpu_node.sh", "trn1_node.sh", "neuron_install.sh", "nxdt_install.sh")


class ClusterAssets(Construct):
    def __init__(self, scope: Construct, construct_id: str, spec: DeploymentSpec, build_dir: Path) -> None:
        super().__init__(scope, construct_id)
        self.scripts: dict[str, s3_assets.Asset] = {
            name: s3_assets.Asset(self, name.replace("_", "-").removesuffix(".sh"), path=str(BOOTSTRAP / name))
            for name in SCRIPTS
        }
        payload = build_payload(spec, deployment_yaml(spec), build_dir)
        self.payload = s3_assets.Asset(self, "head-node-payload", path=str(payload))
        self.payload_parameter = ssm.StringParameter(
            self,
            "head-node-payload-uri",
            parameter_name=payload_parameter_name(spec),
            string_value=self.payload.s3_object_url,
            description=f"{spec.name}: S3 URI of the head node's current payload (read by head_node.sh)",
        )

    @property
    def all(self) -> list[s3_assets.Asset]:
        return [*self.scripts.values(), self.payload]

    def uri(self, script: str) -> str:
        return self.scripts[script].s3_object_url

    @property
    def object_arns(self) -> list[str]:
        return [f"{asset.bucket.bucket_arn}/{asset.s3_object_key}" for asset in self.all]
