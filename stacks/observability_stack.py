"""Compute account: where the cluster's metrics go. The Prometheus workspace (KMS, logs, alert rules, the SSM
key of its remote-write URL), its VPC endpoint, the head node's permission to write, and optionally Grafana."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from policies.observability import head_node_metrics_policy
from spec import DeploymentSpec
from stacks.network_stack import NetworkStack
from stacks.parts.managed_grafana import ManagedGrafana
from stacks.parts.managed_prometheus import ManagedPrometheus
from stacks.parts.prometheus_endpoint import PrometheusEndpoint


class ObservabilityStack(Stack):
    def __init__(
        self, scope: Construct, construct_id: str, spec: DeploymentSpec, network: NetworkStack, **kwargs: Any
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        assert spec.cluster is not None
        subnets = network.network.compute_subnets
        self.prometheus = ManagedPrometheus(self, "Prometheus", spec)
        workspace = self.prometheus.workspace_arn
        self.endpoint = PrometheusEndpoint(
            self, "PrometheusEndpoint", spec, network.network.vpc, subnets, network.security_groups.endpoints, workspace
        )
        # Attached by role name, like the cluster stack's node permissions: the role lives in the identity stack.
        self.head_node_policy = iam.CfnPolicy(
            self,
            "HeadNodeMetrics",
            policy_name="cluster-metrics",
            roles=[spec.role_name("head-node")],
            policy_document=head_node_metrics_policy(spec, workspace),
        )
        CfnOutput(self, "PrometheusWorkspaceArn", value=workspace)
        CfnOutput(self, "PrometheusQueryUrl", value=self.prometheus.workspace.attr_prometheus_endpoint)
        if spec.cluster.observability.managed_grafana:
            self.grafana = ManagedGrafana(self, "Grafana", spec, workspace)
            CfnOutput(self, "GrafanaUrl", value=self.grafana.workspace.attr_endpoint)
