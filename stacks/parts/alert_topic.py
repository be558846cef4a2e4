"""Where the workspace's alerts go: AMP's alert manager routes every alert of the rule-groups namespace to one
SNS topic, encrypted with the metrics key; people (and chat or paging integrations) subscribe to the topic."""

from __future__ import annotations

from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct

from policies.observability import alert_topic_arn, alert_topic_name, alert_topic_policy
from spec import DeploymentSpec


def alertmanager_definition(spec: DeploymentSpec) -> str:
    """AMP's alert manager definition: Alertmanager's configuration under `alertmanager_config`, one SNS receiver
    signed with SigV4 (AMP's alert manager speaks SNS only)."""
    return f"""alertmanager_config: |
  route:
    receiver: cluster-alerts
    group_by: [alertname, node]
    group_wait: 30s
    group_interval: 5m
    repeat_interval: 4h
  receivers:
    - name: cluster-alerts
      sns_configs:
        - topic_arn: {alert_topic_arn(spec)}
          subject: '[{spec.name}] {{{{ .CommonLabels.alertname }}}}'
          sigv4:
            region: {spec.region}
"""


class AlertTopic(Construct):
    def __init__(self, scope: Construct, construct_id: str, spec: DeploymentSpec, key: kms.IKey) -> None:
        super().__init__(scope, construct_id)
        assert spec.cluster is not None
        self.topic = sns.CfnTopic(
            self,
            "Topic",
            topic_name=alert_topic_name(spec),
            display_name=f"{spec.name} cluster alerts",
            kms_master_key_id=key.key_arn,
        )
        self.subscriptions = [
            sns.CfnSubscription(self, f"Email{index}", topic_arn=self.topic.ref, protocol="email", endpoint=address)
            for index, address in enumerate(spec.cluster.observability.alert_emails)
        ]

    def allow_publishing_from(self, spec: DeploymentSpec, workspace_arn: str) -> sns.CfnTopicPolicy:
        return sns.CfnTopicPolicy(
            self, "Policy", topics=[self.topic.ref], policy_document=alert_topic_policy(spec, workspace_arn)
        )
