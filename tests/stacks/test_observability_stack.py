"""The observability stack's template: the Prometheus workspace encrypted with its own key, the endpoint that
admits only the head node's remote write to it, the head node's exact grant, the alert rules, Grafana."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from policies.observability import (
    alert_topic_arn,
    alert_topic_policy,
    grafana_query_policy,
    grafana_trust_policy,
    head_node_metrics_policy,
    metrics_key_alias,
    metrics_key_policy,
    metrics_log_group_name,
    prometheus_endpoint_policy,
)
from spec.observability import remote_write_parameter
from stacks.parts.alert_topic import alertmanager_definition
from stacks.parts.managed_prometheus import ALERT_RULES
from tests.stacks.conftest import Assembly

pytestmark = pytest.mark.synth


def _debian_tool(binary: str, package: str) -> str:
    """The Prometheus project's own checker, from Debian (installed when missing, like the local SLURM's)."""
    import shutil

    from cluster.verify.local_slurm.install import apt_install

    if shutil.which(binary) is None:
        apt_install((package,))
    path = shutil.which(binary)
    assert path is not None, f"{binary}: not installed by {package}"
    return path


def _one(resources: dict[str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    assert len(resources) == 1, list(resources)
    return next(iter(resources.items()))


def _of(template: dict[str, Any], kind: str) -> tuple[str, dict[str, Any]]:
    return _one({k: v for k, v in template["Resources"].items() if v["Type"] == kind})


def _arn(logical: str) -> dict[str, list[str]]:
    return {"Fn::GetAtt": [logical, "Arn"]}


WORKSPACE = "arn:aws:aps:us-east-1:111111111111:workspace/ws-builder"


def _naming(document: dict[str, Any], workspace_id: str) -> dict[str, Any]:
    """A builder's document (given a stand-in ARN) as the template renders it: the workspace's Fn::GetAtt."""
    return json.loads(json.dumps(document).replace(json.dumps(WORKSPACE), json.dumps(_arn(workspace_id))))


def test_the_workspace_is_encrypted_with_its_own_key_whose_policy_is_the_builders(default_assembly: Assembly) -> None:
    spec, template = default_assembly.spec, default_assembly.templates["observability"]
    key_id, key = _of(template, "AWS::KMS::Key")
    _, workspace = _of(template, "AWS::APS::Workspace")
    assert workspace["Properties"]["KmsKeyArn"] == _arn(key_id)
    assert key["Properties"]["KeyPolicy"] == metrics_key_policy(spec)
    assert key["Properties"]["EnableKeyRotation"] is True and key["DeletionPolicy"] == "Retain"
    _, alias = _of(template, "AWS::KMS::Alias")
    assert alias["Properties"] == {"AliasName": metrics_key_alias(spec), "TargetKeyId": _arn(key_id)}
    # Only AMP (kms:ViaService) and CloudWatch Logs for the workspace's own log group use the key.
    statements = {s["Sid"]: s for s in key["Properties"]["KeyPolicy"]["Statement"]}
    assert statements["PrometheusEncryptsThroughAps"]["Condition"]["StringEquals"]["kms:ViaService"] == (
        "aps.us-east-1.amazonaws.com"
    )
    assert statements["PrometheusGrantsThroughAps"]["Condition"]["Bool"] == {"kms:GrantIsForAWSResource": "true"}
    logs = statements["LogsEncryptTheWorkspaceLogGroup"]["Condition"]["ArnEquals"]
    assert logs == {
        "kms:EncryptionContext:aws:logs:arn": f"arn:aws:logs:us-east-1:111111111111:log-group:{metrics_log_group_name(spec)}"
    }


def test_the_workspace_logs_to_its_encrypted_log_group(default_assembly: Assembly) -> None:
    spec, template = default_assembly.spec, default_assembly.templates["observability"]
    key_id, _ = _of(template, "AWS::KMS::Key")
    group_id, group = _of(template, "AWS::Logs::LogGroup")
    _, workspace = _of(template, "AWS::APS::Workspace")
    assert workspace["Properties"]["LoggingConfiguration"] == {"LogGroupArn": _arn(group_id)}
    assert workspace["Properties"]["Alias"] == "llm-demo-cluster-metrics"
    assert group["Properties"]["LogGroupName"] == metrics_log_group_name(spec)
    assert group["Properties"]["KmsKeyId"] == _arn(key_id)
    assert group["Properties"]["RetentionInDays"] == spec.cluster.log_retention_days  # type: ignore[union-attr]


def test_the_remote_write_url_is_published_under_the_specs_key(default_assembly: Assembly) -> None:
    template = default_assembly.templates["observability"]
    workspace_id, _ = _of(template, "AWS::APS::Workspace")
    _, parameter = _of(template, "AWS::SSM::Parameter")
    assert parameter["Properties"]["Name"] == remote_write_parameter("llm-demo")
    # PrometheusEndpoint is https://aps-workspaces.<region>.amazonaws.com/workspaces/<id>/ (trailing slash).
    assert parameter["Properties"]["Value"] == {
        "Fn::Join": ["", [{"Fn::GetAtt": [workspace_id, "PrometheusEndpoint"]}, "api/v1/remote_write"]]
    }


def test_the_endpoint_admits_only_the_head_nodes_remote_write_to_this_workspace(default_assembly: Assembly) -> None:
    spec, template = default_assembly.spec, default_assembly.templates["observability"]
    workspace_id, _ = _of(template, "AWS::APS::Workspace")
    _, endpoint = _of(template, "AWS::EC2::VPCEndpoint")
    props = endpoint["Properties"]
    assert props["ServiceName"] == "com.amazonaws.us-east-1.aps-workspaces"
    assert props["VpcEndpointType"] == "Interface" and props["PrivateDnsEnabled"] is True
    assert props["PolicyDocument"] == _naming(prometheus_endpoint_policy(spec, WORKSPACE), workspace_id)
    assert props["PolicyDocument"]["Statement"] == [
        {
            "Sid": "HeadNodeRemoteWritesThisWorkspace",
            "Effect": "Allow",
            "Principal": "*",
            "Action": "aps:RemoteWrite",
            "Resource": _arn(workspace_id),
            "Condition": {
                "StringEquals": {
                    "aws:PrincipalOrgID": "o-a1b2c3d4e5",
                    "aws:PrincipalArn": "arn:aws:iam::111111111111:role/llm-demo-head-node",
                }
            },
        }
    ]
    # In the interface endpoints' group, which admits HTTPS from the cluster group only (network stack).
    (group,) = props["SecurityGroupIds"]
    assert "SecurityGroupsEndpoints" in json.dumps(group)


def test_the_head_node_may_write_this_workspace_and_read_its_url_nothing_more(default_assembly: Assembly) -> None:
    spec, template = default_assembly.spec, default_assembly.templates["observability"]
    workspace_id, _ = _of(template, "AWS::APS::Workspace")
    _, policy = _of(template, "AWS::IAM::Policy")
    assert policy["Properties"]["Roles"] == ["llm-demo-head-node"]
    assert policy["Properties"]["PolicyDocument"] == _naming(head_node_metrics_policy(spec, WORKSPACE), workspace_id)
    assert policy["Properties"]["PolicyDocument"]["Statement"] == [
        {
            "Sid": "RemoteWriteClusterMetrics",
            "Effect": "Allow",
            "Action": "aps:RemoteWrite",
            "Resource": _arn(workspace_id),
        },
        {
            "Sid": "ReadRemoteWriteUrl",
            "Effect": "Allow",
            "Action": "ssm:GetParameter",
            "Resource": "arn:aws:ssm:us-east-1:111111111111:parameter/llm-demo/observability/remote-write-url",
        },
    ]
    # The compute nodes are scraped, never push: no stack gives their role anything for metrics.
    for key, stack in default_assembly.templates.items():
        for resource in stack["Resources"].values():
            if resource["Type"] == "AWS::IAM::Policy" and "llm-demo-cluster-node" in resource["Properties"]["Roles"]:
                assert "aps:" not in json.dumps(resource["Properties"]["PolicyDocument"]), key


def test_the_alert_rules_are_the_repos_rules_file_and_promtool_accepts_it(default_assembly: Assembly) -> None:
    template = default_assembly.templates["observability"]
    workspace_id, _ = _of(template, "AWS::APS::Workspace")
    _, namespace = _of(template, "AWS::APS::RuleGroupsNamespace")
    assert namespace["Properties"]["Workspace"] == _arn(workspace_id)
    assert namespace["Properties"]["Data"] == ALERT_RULES.read_text()
    # AMP takes Prometheus' rules-file format; promtool (Debian's prometheus package) is its checker.
    promtool = _debian_tool("promtool", "prometheus")
    checked = subprocess.run([promtool, "check", "rules", str(ALERT_RULES)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_alerts_go_to_an_encrypted_topic_only_this_workspace_publishes_to(default_assembly: Assembly) -> None:
    spec, template = default_assembly.spec, default_assembly.templates["observability"]
    key_id, key = _of(template, "AWS::KMS::Key")
    workspace_id, workspace = _of(template, "AWS::APS::Workspace")
    topic_id, topic = _of(template, "AWS::SNS::Topic")
    assert topic["Properties"]["KmsMasterKeyId"] == _arn(key_id)
    assert topic["Properties"]["TopicName"] == alert_topic_arn(spec).rsplit(":", 1)[1]
    _, policy = _of(template, "AWS::SNS::TopicPolicy")
    assert policy["Properties"]["Topics"] == [{"Ref": topic_id}]
    assert policy["Properties"]["PolicyDocument"] == _naming(alert_topic_policy(spec, WORKSPACE), workspace_id)
    # SNS encrypts each message under the topic's ARN as encryption context: the key serves exactly this topic.
    (for_alerts,) = [
        s for s in key["Properties"]["KeyPolicy"]["Statement"] if s["Principal"] == {"Service": "aps.amazonaws.com"}
    ]
    assert for_alerts["Condition"] == {
        "StringEquals": {"kms:EncryptionContext:aws:sns:topicArn": alert_topic_arn(spec)}
    }
    assert workspace["Properties"]["AlertManagerDefinition"] == alertmanager_definition(spec)
    assert topic_id in workspace["DependsOn"]
    assert not [r for r in template["Resources"].values() if r["Type"] == "AWS::SNS::Subscription"]


def test_the_alert_manager_definition_passes_amtool(default_assembly: Assembly, tmp_path: Path) -> None:
    """AMP's definition wraps Alertmanager's own configuration; Alertmanager's checker reads the inner document."""
    import yaml

    definition = yaml.safe_load(alertmanager_definition(default_assembly.spec))
    assert set(definition) == {"alertmanager_config"}
    config = tmp_path / "alertmanager.yml"
    config.write_text(definition["alertmanager_config"])
    amtool = _debian_tool("amtool", "prometheus-alertmanager")
    checked = subprocess.run([amtool, "check-config", str(config)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    (receiver,) = yaml.safe_load(config.read_text())["receivers"]
    assert receiver["sns_configs"][0]["topic_arn"] == alert_topic_arn(default_assembly.spec)


def test_the_cluster_waits_for_the_remote_write_url(default_assembly: Assembly) -> None:
    manifest = json.loads((default_assembly.out / "manifest.json").read_text())
    dependencies = manifest["artifacts"]["llm-demo-cluster"]["dependencies"]
    assert "llm-demo-observability" in dependencies
    assert "llm-demo-identity" in manifest["artifacts"]["llm-demo-observability"]["dependencies"]


def test_no_grafana_unless_the_spec_asks(default_assembly: Assembly) -> None:
    types = {r["Type"] for r in default_assembly.templates["observability"]["Resources"].values()}
    assert not {t for t in types if t.startswith("AWS::Grafana::")}
    assert "AWS::IAM::Role" not in types


def test_grafana_reads_exactly_this_workspace_with_its_own_role(tmp_path: Path) -> None:
    from spec import parse_spec
    from tests.cluster.conftest import with_cluster
    from tests.stacks.test_variants import synth

    doc = with_cluster(lambda c: c.__setitem__("observability", {"managed_grafana": True}))
    templates, _ = synth(doc, tmp_path)  # cdk-nag and the repo's pack included
    spec, template = parse_spec(doc), templates["observability"]
    workspace_id, _ = _of(template, "AWS::APS::Workspace")
    role_id, role = _of(template, "AWS::IAM::Role")
    _, grafana = _of(template, "AWS::Grafana::Workspace")
    assert role["Properties"]["RoleName"] == "llm-demo-grafana"
    assert role["Properties"]["AssumeRolePolicyDocument"] == grafana_trust_policy(spec)
    assert role["Properties"]["Policies"] == [
        {"PolicyName": "query-metrics", "PolicyDocument": _naming(grafana_query_policy(WORKSPACE), workspace_id)}
    ]
    (query,) = role["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
    assert "aps:RemoteWrite" not in query["Action"] and query["Resource"] == _arn(workspace_id)
    props = grafana["Properties"]
    assert props["AccountAccessType"] == "CURRENT_ACCOUNT"
    assert props["AuthenticationProviders"] == ["AWS_SSO"]
    assert props["PermissionType"] == "CUSTOMER_MANAGED" and props["RoleArn"] == _arn(role_id)
    assert props["DataSources"] == ["PROMETHEUS"]
    # VpcConfiguration needs subnets in two AZs (cfn-lint's schema: minItems 2); the cluster VPC has one.
    assert "VpcConfiguration" not in props
    # Grafana queries the regional endpoint, not the VPC endpoint: the endpoint policy still admits only writes.
    _, endpoint = _of(template, "AWS::EC2::VPCEndpoint")
    assert [s["Action"] for s in endpoint["Properties"]["PolicyDocument"]["Statement"]] == ["aps:RemoteWrite"]
    assert "GrafanaUrl" in template["Outputs"]


def test_grafana_with_saml_names_the_idps_metadata_and_alerts_reach_the_listed_addresses(tmp_path: Path) -> None:
    from tests.cluster.conftest import with_cluster
    from tests.stacks.test_variants import synth

    observability = {
        "managed_grafana": True,
        "grafana_authentication": "SAML",
        "grafana_saml_metadata_url": "https://idp.example.com/metadata",
        "alert_emails": ["oncall@example.com"],
    }
    templates, _ = synth(with_cluster(lambda c: c.__setitem__("observability", observability)), tmp_path)
    _, grafana = _of(templates["observability"], "AWS::Grafana::Workspace")
    assert grafana["Properties"]["AuthenticationProviders"] == ["SAML"]
    assert grafana["Properties"]["SamlConfiguration"] == {"IdpMetadata": {"Url": "https://idp.example.com/metadata"}}
    topic_id, _ = _of(templates["observability"], "AWS::SNS::Topic")
    _, subscription = _of(templates["observability"], "AWS::SNS::Subscription")
    assert subscription["Properties"] == {
        "TopicArn": {"Ref": topic_id},
        "Protocol": "email",
        "Endpoint": "oncall@example.com",
    }


def test_without_managed_prometheus_there_is_no_observability_stack(tmp_path: Path) -> None:
    from tests.cluster.conftest import with_cluster
    from tests.stacks.test_variants import synth

    doc = with_cluster(lambda c: c.__setitem__("observability", {"managed_prometheus": False}))
    templates, _ = synth(doc, tmp_path)
    assert "observability" not in templates
