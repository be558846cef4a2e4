"""The cluster stack: ParallelCluster's provider as a nested stack and the cluster as its custom resource."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cluster.pcluster.runner import schema_errors
from policies.cluster_nodes import CLUSTER_TAG
from tests.stacks.conftest import Assembly


def _one(assembly: Assembly, kind: str) -> dict[str, Any]:
    found = list(assembly.resources("cluster", kind).values())
    assert len(found) == 1, f"{kind}: {len(found)}"
    return found[0]


def test_provider_is_parallelclusters_official_template_for_the_spec_version(default_assembly: Assembly) -> None:
    provider = _one(default_assembly, "AWS::CloudFormation::Stack")
    url = provider["Properties"]["TemplateURL"]["Fn::Sub"]
    version = default_assembly.spec.cluster.parallelcluster_version  # type: ignore[union-attr]
    assert url == (
        "https://${AWS::Region}-aws-parallelcluster.s3.${AWS::Region}.${AWS::URLSuffix}"
        f"/parallelcluster/{version}/templates/custom_resource/cluster.yaml"
    )


def test_cluster_deletion_policy_is_a_property_and_the_resource_is_not_retained(default_assembly: Assembly) -> None:
    cluster = _one(default_assembly, "Custom::PclusterCluster")
    spec_cluster = default_assembly.spec.cluster
    assert spec_cluster is not None
    assert cluster["Properties"]["DeletionPolicy"] == spec_cluster.deletion_policy
    # A retained custom resource never gets Delete: the cluster would outlive its stack.
    assert cluster.get("DeletionPolicy", "Delete") == "Delete"
    assert cluster.get("UpdateReplacePolicy", "Delete") == "Delete"
    assert cluster["Properties"]["ServiceToken"] == {
        "Fn::GetAtt": [_logical_id(default_assembly, "AWS::CloudFormation::Stack"), "Outputs.ServiceToken"]
    }
    assert cluster["Properties"]["ClusterName"] != default_assembly.spec.stack_names["cluster"]


def test_nodes_use_our_roles_and_our_security_group(default_assembly: Assembly) -> None:
    spec = default_assembly.spec
    config = _one(default_assembly, "Custom::PclusterCluster")["Properties"]["ClusterConfiguration"]
    assert config["HeadNode"]["Iam"] == {"InstanceRole": spec.role_arn("head-node")}
    for queue in config["Scheduling"]["SlurmQueues"]:
        assert queue["Iam"] == {"InstanceRole": spec.role_arn("cluster-node")}
        groups = queue["Networking"]["SecurityGroups"]
        assert len(groups) == 1 and "AdditionalSecurityGroups" not in queue["Networking"]
        assert "SecurityGroupsCluster" in json.dumps(groups)
    assert "SecurityGroupsCluster" in json.dumps(config["HeadNode"]["Networking"]["SecurityGroups"])


def test_bootstrap_comes_from_versioned_assets(default_assembly: Assembly) -> None:
    config = _one(default_assembly, "Custom::PclusterCluster")["Properties"]["ClusterConfiguration"]
    script = config["HeadNode"]["CustomActions"]["OnNodeConfigured"]["Sequence"][0]
    assert script["Script"].startswith("s3://cdk-")
    payload = script["Args"][script["Args"].index("--payload") + 1]
    assert payload.startswith("s3://cdk-")
    assets = json.loads((default_assembly.out / "llm-demo-cluster.assets.json").read_text())["files"]
    assert len(assets) >= 5  # four bootstrap scripts and the payload (plus the template itself)


def test_outputs_and_termination_protection(default_assembly: Assembly) -> None:
    outputs = default_assembly.templates["cluster"]["Outputs"]
    cluster_id = _logical_id(default_assembly, "Custom::PclusterCluster")
    assert outputs["HeadNodePrivateIp"]["Value"] == {"Fn::GetAtt": [cluster_id, "headNode.privateIpAddress"]}
    assert outputs["ValidationMessages"]["Value"] == {"Fn::GetAtt": [cluster_id, "validationMessages"]}
    manifest = json.loads((default_assembly.out / "manifest.json").read_text())
    properties = manifest["artifacts"]["llm-demo-cluster"]["properties"]
    assert properties.get("terminationProtection") is True


def test_node_policies_are_scoped_to_this_cluster(default_assembly: Assembly) -> None:
    policies = {
        p["Properties"]["Roles"][0]: p["Properties"]["PolicyDocument"]
        for p in default_assembly.resources("cluster", "AWS::IAM::Policy").values()
    }
    assert set(policies) == {"llm-demo-head-node", "llm-demo-cluster-node"}
    head = {s["Sid"]: s for s in policies["llm-demo-head-node"]["Statement"]}
    assert head["TerminateOwnNodesOnly"]["Condition"] == {
        "StringEquals": {f"aws:ResourceTag/{CLUSTER_TAG}": "llm-demo"}
    }
    assert head["PassComputeRoleToEc2"]["Resource"] == default_assembly.spec.role_arn("cluster-node")
    for document in policies.values():
        for statement in document["Statement"]:
            actions = [statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"]
            assert not any(a.endswith(":*") or a == "*" for a in actions), statement
            assert not any(a.startswith("s3:") for a in actions) or statement["Resource"] != "*"


def _logical_id(assembly: Assembly, kind: str) -> str:
    (logical_id,) = assembly.resources("cluster", kind)
    return logical_id


def _placeholders(value: Any, key: str = "") -> Any:
    """CloudFormation references -> example ids, so ParallelCluster's schema can read the template's config."""
    if isinstance(value, dict):
        if len(value) == 1 and next(iter(value)).startswith(("Fn::", "Ref")):
            if "Subnet" in key:
                return "subnet-0123456789abcdef0"
            return "sg-0123456789abcdef0" if "SecurityGroup" in key else "placeholder"
        return {k: _placeholders(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_placeholders(v, key) for v in value]
    return value


@pytest.mark.pcluster
def test_the_templates_cluster_configuration_passes_parallelclusters_schema(
    default_assembly: Assembly, pcluster_venv: Path
) -> None:
    config = _one(default_assembly, "Custom::PclusterCluster")["Properties"]["ClusterConfiguration"]
    assert schema_errors({"llm-demo": _placeholders(config)}) == {"llm-demo": None}


EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "spec" / "examples").glob("*.yaml"))


@pytest.mark.pcluster
@pytest.mark.parametrize("example", EXAMPLES, ids=[path.stem for path in EXAMPLES])
def test_every_example_cluster_synthesizes_and_passes_parallelclusters_schema(
    example: Path, tmp_path: Path, pcluster_venv: Path
) -> None:
    import yaml

    from tests.stacks.test_variants import synth

    templates, _ = synth(yaml.safe_load(example.read_text()), tmp_path)  # cdk-nag and our pack included
    (cluster,) = [r for r in templates["cluster"]["Resources"].values() if r["Type"] == "Custom::PclusterCluster"]
    config = cluster["Properties"]["ClusterConfiguration"]
    assert schema_errors({"example": _placeholders(config)}) == {"example": None}
