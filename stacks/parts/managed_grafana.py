"""An Amazon Managed Grafana workspace whose only data source is the cluster's Prometheus workspace.

Its role (customer-managed, so it can be exactly this workspace's query permissions) is assumed by Managed
Grafana for workspaces of this account. Grafana queries AMP's regional endpoint with SigV4 as that role: a
VpcConfiguration needs subnets in at least two AZs (the schema's minItems 2) and the cluster's VPC has one, on
purpose (placement groups, capacity reservations). CloudFormation cannot create Grafana data sources
or dashboards: `python -m cluster.grafana_import` does both through Grafana's HTTP API (docs/observability.md).
"""

from __future__ import annotations

from aws_cdk import aws_grafana as grafana
from aws_cdk import aws_iam as iam
from constructs import Construct

from policies.observability import (
    GRAFANA_POLICY_NAME,
    grafana_query_policy,
    grafana_role_name,
    grafana_trust_policy,
)
from spec import DeploymentSpec

# Managed Grafana's major version the repo's dashboards are written for (AMG supports 8.4, 9.4, 10.4).
GRAFANA_VERSION = "10.4"


class ManagedGrafana(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        spec: DeploymentSpec,
        workspace_arn: str,
    ) -> None:
        super().__init__(scope, construct_id)
        assert spec.cluster is not None
        settings = spec.cluster.observability
        self.role = iam.CfnRole(
            self,
            "Role",
            role_name=grafana_role_name(spec),
            description=f"{spec.name}: Managed Grafana reads the cluster's Prometheus workspace (queries only)",
            assume_role_policy_document=grafana_trust_policy(spec),
            policies=[
                iam.CfnRole.PolicyProperty(
                    policy_name=GRAFANA_POLICY_NAME, policy_document=grafana_query_policy(workspace_arn)
                )
            ],
        )
        saml = None
        if settings.grafana_authentication == "SAML":
            saml = grafana.CfnWorkspace.SamlConfigurationProperty(
                idp_metadata=grafana.CfnWorkspace.IdpMetadataProperty(url=settings.grafana_saml_metadata_url)
            )
        self.workspace = grafana.CfnWorkspace(
            self,
            "Workspace",
            name=f"{spec.name}-metrics",
            description=f"{spec.name}: the training cluster's fleet, job and fabric dashboards",
            account_access_type="CURRENT_ACCOUNT",
            authentication_providers=[settings.grafana_authentication],
            saml_configuration=saml,
            permission_type="CUSTOMER_MANAGED",
            role_arn=self.role.attr_arn,
            data_sources=["PROMETHEUS"],
            grafana_version=GRAFANA_VERSION,
            plugin_admin_enabled=False,
        )
