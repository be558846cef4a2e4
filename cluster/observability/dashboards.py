"""The Grafana dashboards (fleet, job, fabric) as JSON, generated here and committed under
cluster/observability/dashboards/ (`python -m cluster.observability.dashboards` rewrites them).

Plain dashboard JSON (schemaVersion 39, timeseries/stat panels, a `datasource` template variable of type
prometheus), so any Grafana 10+ imports it and Amazon Managed Grafana can be provisioned with it. Every query is
checked by a real Prometheus' parser and against the metric names a real scrape returns (tests).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DIRECTORY = Path(__file__).with_name("dashboards")
SCHEMA_VERSION = 39
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
_PANEL_WIDTH = 12
_PANEL_HEIGHT = 8


def _panel(title: str, exprs: dict[str, str], unit: str = "short", kind: str = "timeseries") -> dict[str, Any]:
    return {
        "type": kind,
        "title": title,
        "datasource": DATASOURCE,
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True}},
        "targets": [
            {"refId": chr(ord("A") + index), "expr": expr, "legendFormat": legend, "datasource": DATASOURCE}
            for index, (legend, expr) in enumerate(exprs.items())
        ],
    }


def _variable(name: str, query: str) -> dict[str, Any]:
    return {
        "name": name,
        "type": "query",
        "datasource": DATASOURCE,
        "query": {"query": query, "refId": name},
        "refresh": 2,
        "includeAll": True,
        "multi": True,
        "allValue": ".*",
        "current": {},
    }


def _dashboard(uid: str, title: str, panels: list[dict[str, Any]], variables: list[dict[str, Any]]) -> dict[str, Any]:
    for index, panel in enumerate(panels):
        panel["id"] = index + 1
        panel["gridPos"] = {
            "h": _PANEL_HEIGHT, "w": _PANEL_WIDTH, "x": (index % 2) * _PANEL_WIDTH, "y": (index // 2) * _PANEL_HEIGHT
        }  # fmt: skip
    datasource = {"name": "datasource", "type": "datasource", "query": "prometheus", "current": {}, "hide": 0}
    return {
        "uid": uid,
        "title": title,
        "tags": ["llm-training"],
        "timezone": "utc",
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "editable": True,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": [datasource, *variables]},
        "annotations": {"list": []},
        "panels": panels,
    }


def fleet() -> dict[str, Any]:
    node = '{node=~"$node"}'
    return _dashboard(
        "llm-fleet",
        "LLM cluster: fleet",
        [
            _panel("Slurm nodes by state", {"{{state}}": "sum by (state) (slurm_partition_nodes)"}),
            _panel("Slurm jobs by state", {"{{state}}": "sum by (state) (slurm_jobs)"}),
            _panel(
                "Drained or down nodes",
                {
                    "{{node}} {{state}}: {{reason}}": 'slurm_node_state{state=~"down|drained|draining|fail|failing"} == 1'
                },
                kind="stat",
            ),
            _panel("GPU utilisation", {"{{node}} gpu {{gpu}}": f"DCGM_FI_DEV_GPU_UTIL{node}"}, "percent"),
            _panel("GPU memory used", {"{{node}} gpu {{gpu}}": f"DCGM_FI_DEV_FB_USED{node} * 1024 * 1024"}, "bytes"),
            _panel("XID errors (last code)", {"{{node}} gpu {{gpu}}": f"DCGM_FI_DEV_XID_ERRORS{node}"}),
            _panel(
                "NeuronCore utilisation",
                {"{{node}}": f"avg by (node) (neuroncore_utilization_ratio{node})"},
                "percentunit",
            ),
            _panel(
                "CPU busy",
                {"{{node}}": '1 - avg by (node) (rate(node_cpu_seconds_total{mode="idle", node=~"$node"}[5m]))'},
                "percentunit",
            ),
            _panel(
                "Memory available",
                {"{{node}}": f"node_memory_MemAvailable_bytes{node}"},
                "bytes",
            ),
            _panel(
                "Shared and scratch filesystems free",
                {"{{node}} {{mountpoint}}": 'node_filesystem_avail_bytes{node=~"$node", fstype!~"tmpfs|overlay"}'},
                "bytes",
            ),
        ],
        [_variable("node", "label_values(node_uname_info, node)")],
    )


def job() -> dict[str, Any]:
    job_filter = '{slurm_job_id=~"$slurm_job_id"}'
    return _dashboard(
        "llm-job",
        "LLM cluster: training job",
        [
            _panel("Tokens per second (job)", {"job {{slurm_job_id}}": f"llm_train_tokens_per_second{job_filter}"}),
            _panel("Loss", {"job {{slurm_job_id}}": f"llm_train_loss{job_filter}"}),
            _panel("MFU", {"job {{slurm_job_id}}": f"llm_train_mfu_ratio{job_filter}"}, "percentunit"),
            _panel("Step time", {"job {{slurm_job_id}}": f"llm_train_step_seconds{job_filter}"}, "s"),
            _panel(
                "Device memory (rank 0)",
                {
                    "allocated {{slurm_job_id}}": f"llm_train_memory_allocated_bytes{job_filter}",
                    "reserved {{slurm_job_id}}": f"llm_train_memory_reserved_bytes{job_filter}",
                },
                "bytes",
            ),
            _panel("Checkpoint age", {"job {{slurm_job_id}}": f"llm_train_checkpoint_age_seconds{job_filter}"}, "s"),
            _panel("Step", {"job {{slurm_job_id}}": f"llm_train_step{job_filter}"}, kind="stat"),
            _panel(
                "Nodes held by running jobs",
                {"{{slurm_job_id}} {{slurm_job_name}} ({{user}})": f"slurm_job_nodes{job_filter}"},
            ),
        ],
        [_variable("slurm_job_id", "label_values(llm_train_step, slurm_job_id)")],
    )


def fabric() -> dict[str, Any]:
    node = 'node=~"$node"'
    return _dashboard(
        "llm-fabric",
        "LLM cluster: EFA fabric",
        [
            _panel(
                "EFA transmit per node",
                {"{{node}}": f'sum by (node) (rate(efa_hw_counter_total{{counter="tx_bytes", {node}}}[5m]))'},
                "Bps",
            ),
            _panel(
                "EFA receive per node",
                {"{{node}}": f'sum by (node) (rate(efa_hw_counter_total{{counter="rx_bytes", {node}}}[5m]))'},
                "Bps",
            ),
            _panel(
                "EFA error counters (growth over 10 min)",
                {
                    "{{node}} {{device}} {{counter}}": (
                        f'sum by (node, device, counter) (increase(efa_hw_counter_total{{kind="error", {node}}}[10m])) > 0'
                    )
                },
            ),
            _panel(
                "SRD retransmits",
                {
                    "{{node}} {{counter}}": f'sum by (node, counter) (rate(efa_hw_counter_total{{kind="retransmit", {node}}}[5m]))'
                },
            ),
            _panel("EFA devices per node", {"{{node}}": f"efa_devices{{{node}}}"}, kind="stat"),
            _panel(
                "NVLink bandwidth",
                {"{{node}} gpu {{gpu}}": f"rate(DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL{{{node}}}[5m])"},
            ),
        ],
        [_variable("node", "label_values(efa_devices, node)")],
    )


DASHBOARDS = {"fleet": fleet, "job": job, "fabric": fabric}


def expressions(dashboard: dict[str, Any]) -> Iterator[str]:
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            yield target["expr"]


def instantiate(expr: str) -> str:
    """A panel query with its template variables replaced, as Grafana sends it."""
    return re.sub(r"\$\w+", ".*", expr)


_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "offset", "bool"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (strings, label matchers, ranges and grouping removed)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", "", text)
    text = re.sub(r"\[[^\]]*\]", "", text)
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        name = match.group()
        if name in _KEYWORDS or text[match.end() :].lstrip().startswith("("):
            continue
        if match.start() > 0 and (text[match.start() - 1].isdigit() or text[match.start() - 1] == "."):
            continue  # an exponent or a unit suffix of a number
        names.add(name)
    return names


def write_all(directory: Path = DIRECTORY) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, build in DASHBOARDS.items():
        path = directory / f"{name}.json"
        path.write_text(json.dumps(build(), indent=2) + "\n")
        paths.append(path)
    return paths


if __name__ == "__main__":
    for written in write_all():
        print(written)
