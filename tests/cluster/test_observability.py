"""The head node's rendered Prometheus agent config (promtool's own check) and Slurm output parsing."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from cluster.observability.agent_config import AgentConfigError, dump, render
from cluster.observability.slurm_exporter import SEPARATOR, parse_sinfo
from cluster.observability.targets import Roles, partition_roles, target_groups
from cluster.verify.local_observability import ensure_prometheus
from spec import load_spec
from spec.observability import ExporterPorts, ObservabilitySpec

REMOTE_WRITE = "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-0a1b2c3d-4e5f-6789-abcd-ef0123456789/api/v1/remote_write"


def test_the_agent_config_with_sigv4_remote_write_passes_promtool_in_agent_mode(tmp_path: Path) -> None:
    ensure_prometheus()
    document = render(
        ObservabilitySpec(), cluster_name="llm", targets_dir=Path("/var/lib/llm-prometheus/targets"),
        remote_write_url=REMOTE_WRITE,
    )  # fmt: skip
    assert document["remote_write"][0]["sigv4"] == {"region": "us-east-1"}
    path = tmp_path / "prometheus.yml"
    path.write_text(dump(document))
    result = subprocess.run(["promtool", "check", "config", "--agent", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    jobs = [config["job_name"] for config in yaml.safe_load(path.read_text())["scrape_configs"]]
    assert jobs == ["slurm", "node", "dcgm", "efa", "neuron", "trainer"]


def test_a_remote_write_url_that_is_not_a_workspace_is_refused_in_one_line() -> None:
    with pytest.raises(
        AgentConfigError, match=r"remote-write URL 'https://example.com/x' is not https://aps-workspaces"
    ):
        render(ObservabilitySpec(), cluster_name="x", targets_dir=Path("/t"), remote_write_url="https://example.com/x")


def test_sinfo_states_keep_their_flags_apart_and_powered_down_nodes_get_no_targets() -> None:
    lines = [
        SEPARATOR.join(("gpu-dy-p5-1", "idle~", "gpu*", "gpu-dy-p5-1", "192", "none")),
        SEPARATOR.join(("gpu-st-p5-1", "drained*", "gpu*", "10.0.1.5", "192", "xid 79: gpu fell off the bus")),
        SEPARATOR.join(("trn1-st-trn1-1", "allocated", "trn1", "10.0.2.9", "128", "none")),
    ]
    nodes = parse_sinfo("\n".join(lines))
    assert [(n.state, n.flags, n.partition, n.reason) for n in nodes] == [
        ("idle", "~", "gpu", ""), ("drained", "*", "gpu", "xid 79: gpu fell off the bus"), ("allocated", "", "trn1", ""),
    ]  # fmt: skip
    roles = partition_roles(load_spec(Path("spec/examples/trn1-neuron.yaml")))
    roles["gpu"] = Roles(gpu=True, efa=True)
    groups = target_groups(nodes, [], roles, ExporterPorts(), {})
    assert [g["targets"] for g in groups["dcgm"]] == [["10.0.1.5:9400"]]
    assert [g["targets"] for g in groups["neuron"]] == [["10.0.2.9:8000"]]
    assert len(groups["node"]) == 2


def _lost(ours: object, back: object, path: str = "") -> list[str]:
    """Keys and values of `ours` that did not survive the round trip into `back`."""
    if isinstance(ours, dict) and isinstance(back, dict):
        lost = [f"{path}/{key}" for key in ours if key not in back]
        return lost + [item for key in ours if key in back for item in _lost(ours[key], back[key], f"{path}/{key}")]
    if isinstance(ours, list) and isinstance(back, list) and len(ours) == len(back):
        return [
            item for index, pair in enumerate(zip(ours, back, strict=True)) for item in _lost(*pair, f"{path}[{index}]")
        ]
    return [] if ours == back else [f"{path}: {ours!r} became {back!r}"]


def test_the_dashboards_survive_grafanas_own_dashboard_model_unchanged() -> None:
    """grafana-foundation-sdk's Dashboard types are generated from Grafana's dashboard schema (11.6): a key they do
    not know is dropped, a value of the wrong type changed."""
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.models.dashboard import Dashboard

    from cluster.observability.dashboards import DASHBOARDS

    for name, build in DASHBOARDS.items():
        ours = build()
        back = json.loads(json.dumps(Dashboard.from_json(ours), cls=JSONEncoder))
        assert _lost(ours, back) == [], name
