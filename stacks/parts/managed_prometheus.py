"""The cluster's Amazon Managed Service for Prometheus workspace: encrypted with its own key, logging to its own
log group, holding the repo's alert rules (routed to an SNS topic), and publishing its remote-write URL under a
stable SSM key."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Fn, RemovalPolicy
from aws_cdk import aws_aps as aps
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from policies.observability import metrics_key_alias, metrics_key_policy, metrics_log_group_name
from spec import DeploymentSpec
from spec.observability import remote_write_parameter
from stacks.parts.alert_topic import AlertTopic, alertmanager_definition

REPO = Path(__file__).resolve().parents[2]
# The node side's alert rules (Prometheus rules-file format); AMP evaluates them as one namespace.
ALERT_RULES = REPO / "cluster" / "observability" / "alerts.yaml"
# Prometheus' remote-write path under the workspace endpoint (which ends in a slash).
REMOTE_WRITE_PATH = "api/v1/remote_write"


class ManagedPrometheus(Construct):
    def __init__(self, scope: Construct, construct_id: str, spec: DeploymentSpec) -> None:
        super().__init__(scope, construct_id)
        assert spec.cluster is not None
        key = kms.Key(
            self,
            "Key",
            alias=metrics_key_alias(spec),
            description=f"{spec.name}: encrypts the cluster's metrics (Prometheus workspace and its logs)",
            enable_key_rotation=True,
            # The workspace's data is unreadable without it; a redeploy must not orphan history.
            removal_policy=RemovalPolicy.RETAIN,
        )
        # Exactly policies.metrics_key_policy(spec), as the property (rule packs read it there).
        key.node.default_child.key_policy = metrics_key_policy(spec)  # type: ignore[union-attr]
        self.key = key
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            log_group_name=metrics_log_group_name(spec),
            encryption_key=key,
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.log_group.node.default_child.add_property_override(  # type: ignore[union-attr]
            "RetentionInDays", spec.cluster.log_retention_days
        )
        self.alerts = AlertTopic(self, "Alerts", spec, key)
        self.workspace = aps.CfnWorkspace(
            self,
            "Workspace",
            alias=f"{spec.name}-cluster-metrics",
            kms_key_arn=key.key_arn,
            alert_manager_definition=alertmanager_definition(spec),
            logging_configuration=aps.CfnWorkspace.LoggingConfigurationProperty(
                log_group_arn=self.log_group.log_group_arn
            ),
        )
        # The definition names the topic by its (deterministic) ARN: the topic must exist first.
        self.workspace.add_dependency(self.alerts.topic)
        self.alerts.allow_publishing_from(spec, self.workspace.attr_arn)
        self.rules = aps.CfnRuleGroupsNamespace(
            self,
            "AlertRules",
            name=f"{spec.name}-alerts",
            workspace=self.workspace.attr_arn,
            data=ALERT_RULES.read_text(),
        )
        self.remote_write_url = Fn.join("", [self.workspace.attr_prometheus_endpoint, REMOTE_WRITE_PATH])
        self.remote_write_parameter = ssm.StringParameter(
            self,
            "RemoteWriteUrl",
            parameter_name=remote_write_parameter(spec.name),
            string_value=self.remote_write_url,
            description=f"{spec.name}: the Prometheus workspace's remote-write URL (read by the head node's agent)",
        )

    @property
    def workspace_arn(self) -> str:
        return self.workspace.attr_arn
