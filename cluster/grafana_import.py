"""`python -m cluster.grafana_import`: provision a Grafana (Amazon Managed Grafana, or any Grafana 10+) with the
cluster's Prometheus data source and the repo's dashboards, through Grafana's HTTP API.

CloudFormation creates the Managed Grafana workspace but cannot create data sources or dashboards in it, so
this does, idempotently: the data source (fixed uid, SigV4 with the workspace's IAM role for Amazon Managed
Service for Prometheus), one folder, and each dashboard through the import API with overwrite. The token is a
workspace service-account token, read from an environment variable (never an argument: `ps` shows those).

    export GRAFANA_TOKEN=$(aws grafana create-workspace-service-account-token ... --query serviceAccountToken.key)
    python -m cluster.grafana_import --grafana-url https://g-xxxx.grafana-workspace.us-east-1.amazonaws.com \\
        --prometheus-url "$(aws cloudformation describe-stacks ... PrometheusQueryUrl)" --region us-east-1
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spec.cli import OneLineParser, user_errors
from spec.errors import UserError

REPO = Path(__file__).resolve().parents[1]
# The node side's dashboards (fleet, job, fabric) as Grafana JSON (cluster/observability, issue 17).
DASHBOARDS = REPO / "cluster" / "observability" / "dashboards"
DATASOURCE_UID = "llm-cluster-prometheus"
DATASOURCE_NAME = "LLM cluster (Amazon Managed Prometheus)"
FOLDER_UID = "llm-training"
FOLDER_TITLE = "LLM training"
# Grafana's AWS auth providers: "ec2_iam_role" is what Managed Grafana calls "Workspace IAM role".
WORKSPACE_ROLE_AUTH = "ec2_iam_role"


class ProvisionError(UserError):
    """A dashboard or argument the import cannot use; the message names it."""


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    body: dict[str, Any] | None = None


def datasource_body(prometheus_url: str, region: str) -> dict[str, Any]:
    """AddDataSourceCommand / UpdateDataSourceCommand: the workspace's query URL, signed with SigV4 as the
    Grafana workspace's role (which may query exactly this workspace)."""
    if not prometheus_url.startswith("https://"):
        raise ProvisionError(
            f"--prometheus-url: {prometheus_url!r} is not an https URL (the PrometheusQueryUrl output)"
        )
    return {
        "uid": DATASOURCE_UID,
        "name": DATASOURCE_NAME,
        "type": "prometheus",
        "access": "proxy",
        # Grafana appends /api/v1/query etc.; the workspace endpoint ends in a slash.
        "url": prometheus_url.rstrip("/"),
        "isDefault": True,
        "jsonData": {
            "httpMethod": "POST",
            "sigV4Auth": True,
            "sigV4AuthType": WORKSPACE_ROLE_AUTH,
            "sigV4Region": region,
        },
    }


def import_body(dashboard: dict[str, Any], name: str) -> dict[str, Any]:
    """ImportDashboardRequest for one dashboard: into our folder, replacing an older version, every
    Prometheus data source input (`__inputs`) and `datasource` variable bound to our data source."""
    if not isinstance(dashboard.get("uid"), str) or not isinstance(dashboard.get("title"), str):
        raise ProvisionError(f"{name}: a dashboard needs a string uid and title (they make re-imports idempotent)")
    inputs = []
    for declared in dashboard.get("__inputs", []):
        if declared.get("type") == "datasource" and declared.get("pluginId") == "prometheus":
            inputs.append(
                {"name": declared["name"], "type": "datasource", "pluginId": "prometheus", "value": DATASOURCE_UID}
            )
        elif declared.get("type") == "constant":
            inputs.append({"name": declared["name"], "type": "constant", "value": declared.get("value", "")})
        else:
            raise ProvisionError(
                f"{name}: input {declared.get('name')!r} ({declared.get('pluginId')}) has no value here"
            )
    body = dict(dashboard)
    body["id"] = None  # ids are per instance; the uid identifies the dashboard
    templating = body.get("templating", {}).get("list", [])
    body["templating"] = {
        **body.get("templating", {}),
        "list": [
            {**v, "current": {"text": DATASOURCE_NAME, "value": DATASOURCE_UID}}
            if v.get("type") == "datasource" and v.get("query") == "prometheus"
            else v
            for v in templating
        ],
    }
    return {"dashboard": body, "overwrite": True, "inputs": inputs, "folderUid": FOLDER_UID}


def load_dashboards(directory: Path) -> list[tuple[str, dict[str, Any]]]:
    paths = sorted(directory.glob("*.json"))
    if not paths:
        raise ProvisionError(f"--dashboards: no *.json in {directory}")
    found = []
    for path in paths:
        try:
            found.append((path.name, json.loads(path.read_text())))
        except json.JSONDecodeError as error:
            raise ProvisionError(f"{path.name}: not JSON ({error})") from error
    return found


Send = Callable[[Request], tuple[int, Any]]


def provision(
    send: Send, prometheus_url: str, region: str, dashboards: Iterable[tuple[str, dict[str, Any]]]
) -> list[str]:
    """Everything the import does, through `send` (an HTTP call); returns the imported dashboards' URLs."""
    datasource = datasource_body(prometheus_url, region)
    bodies = [import_body(d, name) for name, d in dashboards]  # refuse a bad file before changing anything
    status, _ = send(Request("GET", f"/api/datasources/uid/{DATASOURCE_UID}"))
    if status == 404:
        _expect(send(Request("POST", "/api/datasources", datasource)), "create the data source")
    else:
        _expect((status, None), "read the data source")
        _expect(send(Request("PUT", f"/api/datasources/uid/{DATASOURCE_UID}", datasource)), "update the data source")
    status, _ = send(Request("GET", f"/api/folders/{FOLDER_UID}"))
    if status == 404:
        _expect(send(Request("POST", "/api/folders", {"uid": FOLDER_UID, "title": FOLDER_TITLE})), "create the folder")
    else:
        _expect((status, None), "read the folder")
    urls = []
    for body in bodies:
        answer = _expect(send(Request("POST", "/api/dashboards/import", body)), f"import {body['dashboard']['uid']}")
        urls.append(str(answer.get("importedUrl", body["dashboard"]["uid"])) if isinstance(answer, dict) else "")
    return urls


def _expect(answer: tuple[int, Any], what: str) -> Any:
    status, payload = answer
    if not 200 <= status < 300:
        raise ProvisionError(f"Grafana refused to {what}: HTTP {status} {payload}")
    return payload


def http_sender(grafana_url: str, token: str, timeout: float = 30.0) -> Send:
    base = grafana_url.rstrip("/")

    def send(request: Request) -> tuple[int, Any]:
        data = None if request.body is None else json.dumps(request.body).encode()
        http = urllib.request.Request(base + request.path, data=data, method=request.method)
        http.add_header("Authorization", f"Bearer {token}")
        http.add_header("Accept", "application/json")
        if data is not None:
            http.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(http, timeout=timeout) as response:
                text = response.read().decode()
                return response.status, json.loads(text) if text else None
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode(errors="replace")[:500]

    return send


@user_errors
def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--grafana-url", required=True, help="the workspace URL (stack output GrafanaUrl)")
    parser.add_argument("--prometheus-url", required=True, help="the workspace's query URL (PrometheusQueryUrl)")
    parser.add_argument("--region", required=True, help="the Prometheus workspace's region (SigV4)")
    parser.add_argument("--dashboards", type=Path, default=DASHBOARDS, help="directory of dashboard JSON files")
    parser.add_argument("--token-env", default="GRAFANA_TOKEN", help="environment variable holding the token")
    args = parser.parse_args(argv)
    token = os.environ.get(args.token_env)
    if not token:
        print(f"--token-env: ${args.token_env} is empty (a Grafana service-account token)", file=sys.stderr)
        return 2
    grafana_url = args.grafana_url if "://" in args.grafana_url else f"https://{args.grafana_url}"
    try:
        urls = provision(
            http_sender(grafana_url, token), args.prometheus_url, args.region, load_dashboards(args.dashboards)
        )
    except ProvisionError as error:
        print(error, file=sys.stderr)
        return 2
    for url in urls:
        print(f"imported {grafana_url.rstrip('/')}{url}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
