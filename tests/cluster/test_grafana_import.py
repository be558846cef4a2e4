"""`python -m cluster.grafana_import` against a local HTTP server standing in for Grafana: every request body is
checked against Grafana's own command structs (tests/cluster/fixtures/grafana/http_api.json, read from Grafana's
source), and the import is idempotent (a second run updates, never duplicates)."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from cluster import grafana_import
from cluster.grafana_import import DASHBOARDS, DATASOURCE_UID, FOLDER_UID, ProvisionError, import_body, load_dashboards

FACTS = json.loads((Path(__file__).parent / "fixtures" / "grafana" / "http_api.json").read_text())
TOKEN = "glsa_test_token"
PROMETHEUS = "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-0123456789abcdef/"


class FakeGrafana:
    """Grafana's routes that the import uses, with its status codes; remembers what it was sent."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str], Any]] = []
        self.datasources: set[str] = set()
        self.folders: set[str] = set()

    def answer(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        if method == "GET" and path.startswith("/api/datasources/uid/"):
            return (200, {"uid": path.rsplit("/", 1)[1]}) if path.rsplit("/", 1)[1] in self.datasources else (404, {})
        if method == "POST" and path == "/api/datasources":
            if body["uid"] in self.datasources:
                return 409, {"message": "data source with the same uid already exists"}
            self.datasources.add(body["uid"])
            return 200, {"datasource": body}
        if method == "PUT" and path.startswith("/api/datasources/uid/"):
            return (200, {}) if path.rsplit("/", 1)[1] in self.datasources else (404, {})
        if method == "GET" and path.startswith("/api/folders/"):
            return (200, {}) if path.rsplit("/", 1)[1] in self.folders else (404, {})
        if method == "POST" and path == "/api/folders":
            self.folders.add(body["uid"])
            return 200, {"uid": body["uid"]}
        if method == "POST" and path == "/api/dashboards/import":
            if body.get("folderUid") not in self.folders:
                return 400, {"message": "folder not found"}
            uid = body["dashboard"]["uid"]
            return 200, {"uid": uid, "imported": True, "importedUrl": f"/d/{uid}/x"}
        return 404, {"message": "not found"}


@pytest.fixture
def grafana() -> Iterator[tuple[FakeGrafana, str]]:
    fake = FakeGrafana()

    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            fake.requests.append((self.command, self.path, dict(self.headers), body))
            status, payload = fake.answer(self.command, self.path, body)
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = _handle

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _like_the_repos(uid: str) -> dict[str, Any]:
    """The shape of cluster/observability/dashboards/*.json: a `datasource` variable and panels that use it."""
    source = {"type": "prometheus", "uid": "${datasource}"}
    return {
        "uid": uid,
        "title": f"LLM cluster: {uid}",
        "schemaVersion": 39,
        "templating": {"list": [{"name": "datasource", "type": "datasource", "query": "prometheus", "current": {}}]},
        "panels": [
            {"id": 1, "type": "timeseries", "datasource": source, "targets": [{"expr": "up", "datasource": source}]}
        ],
    }


def _exported(uid: str) -> dict[str, Any]:
    """A dashboard exported 'for sharing externally': its data source is an `__inputs` entry."""
    return {
        "__inputs": [{"name": "DS_PROM", "label": "Prometheus", "type": "datasource", "pluginId": "prometheus"}],
        "uid": uid,
        "title": "exported",
        "panels": [{"datasource": {"type": "prometheus", "uid": "${DS_PROM}"}, "targets": [{"expr": "up"}]}],
    }


def _check_against_grafanas_structs(method: str, path: str, body: Any) -> None:
    route = re.sub(r"/api/datasources/uid/[^/]+$", "/api/datasources/uid/{uid}", path)
    facts = FACTS["requests"][f"{method} {route}"]
    unknown = set(body) - set(facts["fields"])
    assert not unknown, f"{method} {path}: {sorted(unknown)} are not fields of Grafana's {facts['struct']}"
    assert all(body.get(name) for name in facts.get("required", [])), (method, path)
    assert not set(body) & set(facts.get("deprecated", []))
    for given in body.get("inputs", []):
        assert set(given) <= set(facts["input_fields"])


def _run(tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch, *dashboards: dict[str, Any]) -> int:
    for dashboard in dashboards:
        (tmp_path / f"{dashboard['uid']}.json").write_text(json.dumps(dashboard))
    monkeypatch.setenv("GRAFANA_TOKEN", TOKEN)
    argv = [
        "--grafana-url",
        url,
        "--prometheus-url",
        PROMETHEUS,
        "--region",
        "us-east-1",
        "--dashboards",
        str(tmp_path),
    ]
    return grafana_import.main(argv)


def test_the_import_sends_what_grafanas_api_accepts(
    grafana: tuple[FakeGrafana, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake, url = grafana
    assert _run(tmp_path, url, monkeypatch, _like_the_repos("llm-fleet"), _exported("shared")) == 0
    sent = [(method, path, body) for method, path, _, body in fake.requests]
    assert [(m, p) for m, p, _ in sent] == [
        ("GET", f"/api/datasources/uid/{DATASOURCE_UID}"),
        ("POST", "/api/datasources"),
        ("GET", f"/api/folders/{FOLDER_UID}"),
        ("POST", "/api/folders"),
        ("POST", "/api/dashboards/import"),
        ("POST", "/api/dashboards/import"),
    ]
    for method, path, body in sent:
        if body is not None:
            _check_against_grafanas_structs(method, path, body)
    assert all(headers["Authorization"] == f"Bearer {TOKEN}" for _, _, headers, _ in fake.requests)
    datasource = sent[1][2]
    assert datasource["type"] == "prometheus" and datasource["url"] == PROMETHEUS.rstrip("/")
    assert datasource["jsonData"] == {
        "httpMethod": "POST",
        "sigV4Auth": True,
        "sigV4AuthType": "ec2_iam_role",
        "sigV4Region": "us-east-1",
    }
    assert set(datasource["jsonData"]) - {"httpMethod"} <= set(FACTS["sigv4_json_data"]["keys"])
    assert datasource["jsonData"]["sigV4AuthType"] in FACTS["sigv4_json_data"]["auth_types"]
    fleet, shared = (body for method, path, body in sent if path == "/api/dashboards/import")
    for imported in (fleet, shared):
        assert imported["overwrite"] is True and imported["folderUid"] == FOLDER_UID
        assert imported["dashboard"]["id"] is None
    (variable,) = fleet["dashboard"]["templating"]["list"]
    assert variable["current"]["value"] == DATASOURCE_UID
    # Every ${input} the exported dashboard names gets a value: Grafana refuses an import with one missing.
    named = set(re.findall(r"\$\{(DS_[A-Z_]+)\}", json.dumps(shared["dashboard"])))
    assert {i["name"] for i in shared["inputs"] if i["value"] == DATASOURCE_UID} == named == {"DS_PROM"}
    assert "imported " + url + "/d/llm-fleet/x" in capsys.readouterr().out


def test_a_second_run_updates_in_place(
    grafana: tuple[FakeGrafana, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, url = grafana
    assert _run(tmp_path, url, monkeypatch, _like_the_repos("llm-job")) == 0
    fake.requests.clear()
    assert _run(tmp_path, url, monkeypatch) == 0
    routes = [(method, path) for method, path, _, _ in fake.requests]
    assert ("PUT", f"/api/datasources/uid/{DATASOURCE_UID}") in routes
    assert ("POST", "/api/datasources") not in routes and ("POST", "/api/folders") not in routes


def test_a_bad_dashboard_stops_the_import_before_anything_changes(
    grafana: tuple[FakeGrafana, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake, url = grafana
    broken = _like_the_repos("broken")
    (tmp_path / "ok.json").write_text(json.dumps(_like_the_repos("ok")))
    del broken["title"]
    assert _run(tmp_path, url, monkeypatch, broken) == 2
    assert "broken.json: a dashboard needs a string uid and title" in capsys.readouterr().err
    assert fake.requests == []


def test_without_a_token_nothing_is_sent(grafana: tuple[FakeGrafana, str], monkeypatch: pytest.MonkeyPatch) -> None:
    fake, url = grafana
    monkeypatch.delenv("GRAFANA_TOKEN", raising=False)
    argv = ["--grafana-url", url, "--prometheus-url", PROMETHEUS, "--region", "us-east-1"]
    assert grafana_import.main(argv) == 2
    assert fake.requests == []


def test_the_repos_dashboards_import(tmp_path: Path) -> None:
    """The dashboards the node side commits (cluster/observability/dashboards) pass the import's checks; until
    they are there, the import refuses the empty directory instead of importing nothing."""
    if not list(DASHBOARDS.glob("*.json")):
        with pytest.raises(ProvisionError, match=r"no \*\.json"):
            load_dashboards(DASHBOARDS)
        return
    for name, dashboard in load_dashboards(DASHBOARDS):
        body = import_body(dashboard, name)
        _check_against_grafanas_structs("POST", "/api/dashboards/import", body)
