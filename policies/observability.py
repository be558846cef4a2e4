"""Who may write and read the cluster's metrics: the Amazon Managed Service for Prometheus workspace's key,
its VPC endpoint, the head node's grant, the alert topic and the Grafana workspace's role
(stacks/observability_stack.py).

The head node's Prometheus agent only POSTs to the workspace's `api/v1/remote_write` (Prometheus' sigv4
remote-write client sends nothing else), which IAM authorizes as aps:RemoteWrite; it reads the URL from one
SSM parameter at boot. Exporters on the compute nodes are scraped, so the compute role gets nothing. The
Grafana workspace's role queries (aps:QueryMetrics and the metadata reads its Prometheus data source makes). Every
document names exactly this workspace; the workspace ARN exists only once CloudFormation made it, so each
builder takes it as an argument (a token in the stack, a concrete ARN in the tests).
"""

from __future__ import annotations

from policies.documents import PolicyDocument, account_root, document, statement
from policies.interface_endpoints import ANY, org_conditions
from spec import DeploymentSpec
from spec.observability import remote_write_parameter

REMOTE_WRITE_ACTIONS: tuple[str, ...] = ("aps:RemoteWrite",)
# What Grafana's Prometheus data source calls: instant and range queries, series, labels and metadata.
QUERY_ACTIONS: tuple[str, ...] = ("aps:QueryMetrics", "aps:GetSeries", "aps:GetLabels", "aps:GetMetricMetadata")
# The VPC endpoint service of AMP's Prometheus-compatible APIs (remote write and query); `aps` is the
# control plane (CreateWorkspace, ...), which nothing in the VPC calls.
ENDPOINT_SERVICE = "aps-workspaces"
# The inline policy of the Grafana role (stacks/parts/managed_grafana.py).
GRAFANA_POLICY_NAME = "query-metrics"


def metrics_key_alias(spec: DeploymentSpec) -> str:
    return f"alias/{spec.name}-metrics"


def metrics_log_group_name(spec: DeploymentSpec) -> str:
    """The workspace's own log group (rule evaluation and ingestion errors). Vended logs live under
    /aws/vendedlogs/ so that CloudWatch Logs' delivery policy for them stays one small statement."""
    return f"/aws/vendedlogs/prometheus/{spec.name}"


def grafana_role_name(spec: DeploymentSpec) -> str:
    return spec.role_name("grafana")


def remote_write_parameter_arn(spec: DeploymentSpec) -> str:
    return f"arn:aws:ssm:{spec.region}:{spec.accounts.compute}:parameter{remote_write_parameter(spec.name)}"


def alert_topic_name(spec: DeploymentSpec) -> str:
    return f"{spec.name}-cluster-alerts"


def alert_topic_arn(spec: DeploymentSpec) -> str:
    return f"arn:aws:sns:{spec.region}:{spec.accounts.compute}:{alert_topic_name(spec)}"


def metrics_key_policy(spec: DeploymentSpec) -> PolicyDocument:
    """The metrics key: administered by the compute account's IAM, used only through AMP (which keeps a grant for
    its own use), by CloudWatch Logs for the workspace's log group and by SNS for the alert topic."""
    account, region = spec.accounts.compute, spec.region
    through_aps = {"kms:ViaService": f"aps.{region}.amazonaws.com", "kms:CallerAccount": account}
    log_group = f"arn:aws:logs:{region}:{account}:log-group:{metrics_log_group_name(spec)}"
    return document(
        statement("ComputeAccountAdministersKey", "Allow", ["kms:*"], ["*"], account_root(account)),
        statement(
            "PrometheusEncryptsThroughAps",
            "Allow",
            ["kms:DescribeKey", "kms:GenerateDataKey", "kms:Decrypt"],
            ["*"],
            account_root(account),
            {"StringEquals": through_aps},
        ),
        # AMP creates its workspace's grant when the workspace is created; only grants for AWS resources.
        statement(
            "PrometheusGrantsThroughAps",
            "Allow",
            ["kms:CreateGrant"],
            ["*"],
            account_root(account),
            {"StringEquals": through_aps, "Bool": {"kms:GrantIsForAWSResource": "true"}},
        ),
        statement(
            "LogsEncryptTheWorkspaceLogGroup",
            "Allow",
            ["kms:Encrypt", "kms:Decrypt", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:DescribeKey"],
            ["*"],
            {"Service": f"logs.{region}.amazonaws.com"},
            {"ArnEquals": {"kms:EncryptionContext:aws:logs:arn": log_group}},
        ),
        # AMP's alert manager publishes to the encrypted alert topic as the aps service principal; SNS asks KMS
        # for the message's data key with the topic in the encryption context.
        statement(
            "PrometheusAlertsToTheAlertTopic",
            "Allow",
            ["kms:GenerateDataKey*", "kms:Decrypt"],
            ["*"],
            {"Service": "aps.amazonaws.com"},
            {"StringEquals": {"kms:EncryptionContext:aws:sns:topicArn": alert_topic_arn(spec)}},
        ),
    )


def alert_topic_policy(spec: DeploymentSpec, workspace_arn: str) -> PolicyDocument:
    """The alert topic: this workspace's alert manager publishes (aws:SourceArn), over TLS only."""
    topic = alert_topic_arn(spec)
    return document(
        statement(
            "ThisWorkspacePublishesAlerts",
            "Allow",
            ["sns:Publish", "sns:GetTopicAttributes"],
            [topic],
            {"Service": "aps.amazonaws.com"},
            {
                "ArnEquals": {"aws:SourceArn": workspace_arn},
                "StringEquals": {"aws:SourceAccount": spec.accounts.compute},
            },
        ),
        statement(
            "TlsOnly",
            "Deny",
            ["sns:Publish"],
            [topic],
            {"AWS": "*"},
            {"Bool": {"aws:SecureTransport": "false"}},
        ),
    )


def prometheus_endpoint_policy(spec: DeploymentSpec, workspace_arn: str) -> PolicyDocument:
    """The aps-workspaces endpoint: the head node's role remote-writes to this workspace, and nothing else
    passes: no query, no other workspace, no other principal. (Managed Grafana does not query through it: its
    VPC configuration needs subnets in two AZs, and the cluster's VPC has one; see docs/observability.md.)"""
    who = org_conditions(spec, resource=False)["StringEquals"]
    return document(
        statement(
            "HeadNodeRemoteWritesThisWorkspace",
            "Allow",
            REMOTE_WRITE_ACTIONS,
            [workspace_arn],
            ANY,
            {"StringEquals": {**who, "aws:PrincipalArn": spec.role_arn("head-node")}},
        )
    )


def head_node_metrics_policy(spec: DeploymentSpec, workspace_arn: str) -> PolicyDocument:
    return document(
        statement("RemoteWriteClusterMetrics", "Allow", REMOTE_WRITE_ACTIONS, [workspace_arn]),
        # cluster/bootstrap reads the workspace's URL through this stable key.
        statement("ReadRemoteWriteUrl", "Allow", ["ssm:GetParameter"], [remote_write_parameter_arn(spec)]),
    )


def grafana_trust_policy(spec: DeploymentSpec) -> PolicyDocument:
    """Managed Grafana assumes the role for its workspaces in this account only (the workspace id is not known
    before the role exists: the workspace names the role)."""
    account = spec.accounts.compute
    trust = statement(
        "GrafanaWorkspacesOfThisAccount",
        "Allow",
        ["sts:AssumeRole"],
        [],
        {"Service": "grafana.amazonaws.com"},
        {
            "StringEquals": {"aws:SourceAccount": account},
            "ArnLike": {"aws:SourceArn": f"arn:aws:grafana:{spec.region}:{account}:/workspaces/*"},
        },
    )
    del trust["Resource"]  # a trust policy names no resource: the role is the resource
    return document(trust)


def grafana_query_policy(workspace_arn: str) -> PolicyDocument:
    return document(statement("QueryClusterMetrics", "Allow", QUERY_ACTIONS, [workspace_arn]))
