"""The cluster stack: ParallelCluster's provider as a nested stack and the cluster as its custom resource."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cluster.verify.pcluster.runner import schema_errors
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
    # OnNodeConfigured names the payload's stable SSM key; the key holds the versioned asset's URI.
    name = script["Args"][script["Args"].index("--payload-parameter") + 1]
    parameter = _one(default_assembly, "AWS::SSM::Parameter")["Properties"]
    assert parameter["Name"] == name == "/llm-demo/cluster/head-node-payload"
    update = config["HeadNode"]["CustomActions"]["OnNodeUpdated"]["Sequence"][0]
    payload = update["Args"][update["Args"].index("--payload") + 1]
    assert payload.startswith("s3://cdk-") and payload == parameter["Value"]
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


def _placeholders(value: Any) -> Any:
    """CloudFormation references -> example ids, so ParallelCluster's schema can read the template's config."""
    from cluster.verify.runtime_contract import concrete_config

    return concrete_config(value)


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


def test_the_provider_may_pass_and_read_exactly_our_node_roles(default_assembly: Assembly) -> None:
    """ParallelCluster's provider Lambda may pass only role/parallelcluster/*; our roles sit at / (the data
    account names them by ARN), so its AdditionalIamPolicies parameter carries a policy for exactly them."""
    from policies.verify.harness.engine import Engine

    spec = default_assembly.spec
    provider = _one(default_assembly, "AWS::CloudFormation::Stack")
    (policy_id,) = [k for k in default_assembly.resources("cluster", "AWS::IAM::ManagedPolicy")]
    assert provider["Properties"]["Parameters"] == {"AdditionalIamPolicies": {"Ref": policy_id}}
    document = default_assembly.resources("cluster", "AWS::IAM::ManagedPolicy")[policy_id]["Properties"][
        "PolicyDocument"
    ]
    lambda_role = "arn:aws:iam::111111111111:role/llm-demo-cluster-Provider-PclusterLambdaRole-EXAMPLE"
    cases = {
        (action, role): expected
        for role, expected in (
            (spec.role_arn("head-node"), "Allowed"),
            (spec.role_arn("cluster-node"), "Allowed"),
            (spec.role_arn("notebook"), "ImplicitlyDenied"),
            ("arn:aws:iam::111111111111:role/admin", "ImplicitlyDenied"),
        )
        for action in ("iam:PassRole", "iam:GetRole")
    }
    simulations = {
        f"{action} {role}": {
            "request": {
                "principal": lambda_role,
                "action": action,
                "resource": {"resource": role, "accountId": "111111111111"},
                "contextVariables": {"iam:PassedToService": "ec2.amazonaws.com"} if action == "iam:PassRole" else {},
            },
            "identityPolicies": [{"name": "additional", "policy": document}],
            "serviceControlPolicies": [],
            "resourceControlPolicies": [],
        }
        for action, role in cases
    }
    results = Engine().run_batch(simulations)
    assert {key: results[f"{key[0]} {key[1]}"].decision for key in cases} == cases


def test_the_cluster_waits_for_its_node_permissions(default_assembly: Assembly) -> None:
    cluster = _one(default_assembly, "Custom::PclusterCluster")
    policies = set(default_assembly.resources("cluster", "AWS::IAM::Policy"))
    (parameter,) = default_assembly.resources("cluster", "AWS::SSM::Parameter")
    assert len(policies) == 2 and policies | {parameter} <= set(cluster["DependsOn"])


def test_a_retained_file_system_can_be_found_after_a_failed_create(default_assembly: Assembly) -> None:
    output = default_assembly.templates["cluster"]["Outputs"]["FindRetainedFileSystem"]
    assert "aws fsx describe-file-systems" in output["Value"]
    assert "Key=='parallelcluster:cluster-name' && Value=='llm-demo'" in output["Value"]


@pytest.mark.synth
def test_config_problems_run_at_synth_with_the_groups_and_subnet_azs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/cluster.md promises the EFA self-rule and AZ checks at synth: the stack passes what they need."""
    import stacks.cluster_stack
    from spec.platform import validators
    from tests.cluster.conftest import spec_dict
    from tests.stacks.test_variants import synth

    seen: list[dict[str, Any]] = []

    def spy(config: dict[str, Any], **kwargs: Any) -> list[Any]:
        seen.append(kwargs)
        return validators.config_problems(config, **kwargs)

    monkeypatch.setattr(stacks.cluster_stack, "config_problems", spy)
    synth(spec_dict(), tmp_path)
    (kwargs,) = seen
    groups, azs = kwargs["security_groups"], kwargs["subnet_azs"]
    assert len(groups) == 1 and all(validators.allows_all_traffic_with_itself(g, d) for g, d in groups.items())
    assert list(azs.values()) == ["us-east-1a"]
    assert kwargs["reservation_azs"] == {}
