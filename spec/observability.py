"""The `cluster.observability:` section: what the cluster measures and where the measurements go.

One truth for both sides: the nodes' exporters and the head node's Prometheus agent (cluster/observability,
cluster/bootstrap) and the AWS resources they write to (the Amazon Managed Service for Prometheus workspace,
its VPC endpoint, the optional Amazon Managed Grafana workspace in stacks/). Ports are fields so the security
groups, the agent's scrape config and the exporters agree by construction. Imports no CDK and no torch.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from spec.fields import StrictModel


class ExporterPorts(StrictModel):
    """The TCP port each exporter listens on (the exporters' own defaults where they have one)."""

    node: int = Field(default=9100, ge=1024, le=65535, description="Prometheus node exporter.")
    dcgm: int = Field(default=9400, ge=1024, le=65535, description="NVIDIA DCGM exporter (GPU nodes).")
    efa: int = Field(default=9101, ge=1024, le=65535, description="EFA hardware-counter exporter (EFA nodes).")
    neuron: int = Field(default=8000, ge=1024, le=65535, description="neuron-monitor's Prometheus output (trn1).")
    slurm: int = Field(default=9341, ge=1024, le=65535, description="Slurm exporter (head node).")
    trainer: int = Field(
        default=9500, ge=1024, le=65535, description="The training job's own metrics, served by its rank 0."
    )

    @model_validator(mode="after")
    def _distinct(self) -> ExporterPorts:
        ports = self.model_dump()
        seen: dict[int, str] = {}
        for name, port in ports.items():
            if port in seen:
                raise ValueError(f"{name} and {seen[port]} both use port {port}")
            seen[port] = name
        return self


class ObservabilitySpec(StrictModel):
    enabled: bool = Field(default=True, description="Exporters on every node and the head node's Prometheus agent.")
    managed_prometheus: bool = Field(
        default=True,
        description=(
            "An Amazon Managed Service for Prometheus workspace in the compute account (KMS-encrypted), reached "
            "through a VPC interface endpoint; the head node's agent remote-writes to it with SigV4."
        ),
    )
    managed_grafana: bool = Field(
        default=False,
        description="An Amazon Managed Grafana workspace reading the Prometheus workspace, with the repo's dashboards.",
    )
    grafana_authentication: Literal["AWS_SSO", "SAML"] = Field(
        default="AWS_SSO",
        description="How people sign in to the Grafana workspace: IAM Identity Center (AWS_SSO) or the org's SAML IdP.",
    )
    grafana_saml_metadata_url: str | None = Field(
        default=None,
        pattern=r"^https://\S+$",
        description="The SAML IdP's metadata URL (only with grafana_authentication: SAML).",
    )
    alert_emails: list[Annotated[str, Field(pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")]] = Field(
        default_factory=list,
        description=(
            "Addresses subscribed to the alerts' SNS topic (each confirms by mail); others subscribe to the "
            "topic themselves."
        ),
    )
    scrape_interval_seconds: int = Field(default=30, ge=5, le=300)
    ports: ExporterPorts = Field(default_factory=ExporterPorts)

    @model_validator(mode="after")
    def _grafana_needs_prometheus(self) -> ObservabilitySpec:
        if self.managed_grafana and not self.managed_prometheus:
            raise ValueError("managed_grafana needs managed_prometheus (its only data source)")
        if (self.managed_prometheus or self.managed_grafana) and not self.enabled:
            raise ValueError("managed_prometheus/managed_grafana need enabled: true (nothing would be written)")
        saml = self.grafana_authentication == "SAML"
        if saml and self.grafana_saml_metadata_url is None:
            raise ValueError("grafana_authentication SAML needs grafana_saml_metadata_url (the IdP's metadata)")
        if not saml and self.grafana_saml_metadata_url is not None:
            raise ValueError("grafana_saml_metadata_url is read only with grafana_authentication: SAML")
        return self


def remote_write_parameter(cluster_name: str) -> str:
    """SSM parameter holding the workspace's remote-write URL; the head node reads it at boot.

    A stable key, not a bootstrap argument: ParallelCluster refuses updates to OnNodeConfigured.
    """
    return f"/{cluster_name}/observability/remote-write-url"
