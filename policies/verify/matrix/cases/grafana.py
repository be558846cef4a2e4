"""Grafana cases: the role `<name>-grafana` (policies/observability.py) queries this cluster's Prometheus workspace,
writes nothing to it, and reaches none of the datasets."""

from __future__ import annotations

from policies.observability import QUERY_ACTIONS, grafana_role_name
from policies.verify.harness.layers import IDENTITY
from policies.verify.harness.model import ApiRequest, Principal
from policies.verify.matrix.cases.common import no_dataset_reads
from policies.verify.matrix.model import Case, MatrixContext, implicit
from spec import DeploymentSpec


def grafana_cases(spec: DeploymentSpec, context: MatrixContext) -> list[Case]:
    """Only when the observability stack creates the role; the workspace cases need the templates (the workspace's
    ARN exists only once CloudFormation made it)."""
    if spec.cluster is None or not spec.cluster.observability.managed_grafana:
        return []
    compute = spec.accounts.compute
    role = grafana_role_name(spec)
    grafana = Principal("grafana role", f"arn:aws:iam::{compute}:role/{role}", spec.organization_id, role=role)

    def on_workspace(action: str, workspace: str) -> ApiRequest:
        # Grafana calls AMP's regional endpoint from the service's network, not through the VPC.
        return ApiRequest(grafana, action, workspace, compute, None, "workspace")

    cases: list[Case] = []
    workspace = context.metrics_workspace_arn
    if workspace is not None:
        another = workspace.rsplit("/", 1)[0] + "/ws-another-teams-workspace"
        cases += [
            *(
                Case(
                    f"grafana/{action.split(':')[1]}",
                    "grafana",
                    f"the Grafana role calls {action} on this cluster's Prometheus workspace",
                    on_workspace(action, workspace),
                    {},
                    why="its Prometheus data source's queries",
                )
                for action in QUERY_ACTIONS
            ),
            Case(
                "grafana/remote-write",
                "grafana",
                "the Grafana role writes samples into this cluster's Prometheus workspace",
                on_workspace("aps:RemoteWrite", workspace),
                implicit(IDENTITY),
                why="dashboards read; only the head node's agent writes",
            ),
            Case(
                "grafana/query-another-workspace",
                "grafana",
                "the Grafana role queries another Prometheus workspace of the account",
                on_workspace("aps:QueryMetrics", another),
                implicit(IDENTITY),
                why="the role names exactly this cluster's workspace",
            ),
        ]
    cases += no_dataset_reads(
        spec, grafana, "grafana", "grafana", "the Grafana role", "a metrics reader is not a data reader"
    )
    return cases
