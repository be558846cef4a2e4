"""The systemd units each node kind runs for metrics, rendered from the deployment spec's ports.

cluster/bootstrap/observability.sh installs the pinned binaries and writes what this prints; the Python exporters
run from the release's env on shared storage (built by head_node.sh), so a node needs nothing from the internet.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Sequence
from pathlib import Path

from spec.cli import OneLineParser, user_errors
from spec.observability import ObservabilitySpec, remote_write_parameter

MANIFEST = Path(__file__).with_name("binaries.json")
ROLES = ("head", "gpu", "trn1", "cpu")
INSTALL_ROOT = "/opt/llm-observability"
STATE_DIR = "/var/lib/llm-prometheus"
CONFIG_DIR = "/etc/llm-prometheus"
# neuron-monitor streams JSON reports; the Neuron tools' own script turns them into a Prometheus endpoint.
NEURON_BIN = "/opt/aws/neuron/bin"


def manifest(path: Path = MANIFEST) -> dict[str, dict[str, object]]:
    return {name: entry for name, entry in json.loads(path.read_text()).items() if not name.startswith("_")}


def binary_path(name: str, entries: dict[str, dict[str, object]]) -> str:
    entry = entries[name]
    return f"{INSTALL_ROOT}/{name}-{entry['version']}/{Path(str(entry['binary'])).name}"


def _unit(description: str, exec_start: str, *, user: str = "root", after: str = "network-online.target") -> str:
    return (
        "# Written by cluster/bootstrap/observability.sh (cluster/observability/units.py).\n"
        f"[Unit]\nDescription={description}\nAfter={after}\nWants=network-online.target\n\n"
        f"[Service]\nUser={user}\nExecStart={exec_start}\nRestart=always\nRestartSec=10\n\n"
        "[Install]\nWantedBy=multi-user.target\n"
    )


def render_units(
    role: str,
    observability: ObservabilitySpec,
    *,
    release: str,
    spec_path: str,
    efa: bool,
    entries: dict[str, dict[str, object]] | None = None,
    installed: frozenset[str] | None = None,
    remote_write: bool = True,
) -> dict[str, str]:
    """unit file name -> content for one node kind; `release` is the training package on shared storage.
    `installed` names the manifest binaries present (default: all); units of missing ones are left out."""
    if role not in ROLES:
        raise ValueError(f"--role: {role!r} is not one of {', '.join(ROLES)}")
    entries = manifest() if entries is None else entries
    have = frozenset(entries) if installed is None else installed
    ports = observability.ports
    python = f"{release}/.venv/bin/python"
    units: dict[str, str] = {}
    if "node_exporter" in have:
        units["llm-node-exporter.service"] = _unit(
            "Prometheus node exporter",
            f"{binary_path('node_exporter', entries)} --web.listen-address=:{ports.node} "
            "--collector.filesystem.mount-points-exclude=^/(dev|proc|run|sys)($|/)",
            user="nobody",
        )
    if efa and role in ("gpu", "trn1"):
        units["llm-efa-exporter.service"] = _unit(
            "EFA hardware-counter exporter",
            f"{python} -m cluster.observability.efa_exporter --port {ports.efa}",
            user="nobody",
        )
    if role == "gpu" and "dcgm_exporter" in have:
        units["llm-dcgm-exporter.service"] = _unit(
            "NVIDIA DCGM exporter",
            f"{binary_path('dcgm_exporter', entries)} --address :{ports.dcgm}",
            after="nvidia-dcgm.service",
        )
    if role == "trn1":
        pipeline = f"{NEURON_BIN}/neuron-monitor | {NEURON_BIN}/neuron-monitor-prometheus.py --port {ports.neuron}"
        units["llm-neuron-monitor.service"] = _unit(
            "neuron-monitor's Prometheus endpoint", f"/bin/bash -o pipefail -c {shlex.quote(pipeline)}"
        )
    if role == "head":
        units["llm-slurm-exporter.service"] = _unit(
            "Slurm exporter",
            f"{python} -m cluster.observability.slurm_exporter --port {ports.slurm}",
            after="slurmctld.service",
        )
        units["llm-prometheus-targets.service"] = _unit(
            "Prometheus scrape targets from Slurm",
            f"{python} -m cluster.observability.targets --spec {spec_path} --out {STATE_DIR}/targets --every 30",
            after="slurmctld.service",
        )
    if role == "head" and "prometheus" in have and remote_write:
        units["llm-prometheus-agent.service"] = _unit(
            "Prometheus agent (remote-writes to Amazon Managed Service for Prometheus)",
            f"{binary_path('prometheus', entries)} --enable-feature=agent --config.file={CONFIG_DIR}/prometheus.yml "
            f"--storage.agent.path={STATE_DIR}/wal --web.listen-address=127.0.0.1:9090",
        )
    return units


@user_errors
def main(argv: Sequence[str] | None = None) -> None:
    from spec import load_spec

    parser = OneLineParser(prog="python -m cluster.observability.units", description=__doc__)
    parser.add_argument("--spec", type=Path, required=True)
    parser.add_argument("--role", required=True, choices=ROLES)
    parser.add_argument("--release", required=True, help="the training package on shared storage")
    parser.add_argument("--efa", choices=("true", "false"), default="false")
    parser.add_argument("--out", type=Path, help="directory for the unit files")
    parser.add_argument("--print-binaries", action="store_true", help="print the manifest entries this role needs")
    parser.add_argument("--print-settings", action="store_true", help="print: enabled parameter region")
    parser.add_argument("--installed", default=None, help="comma-separated manifest names installed (default: all)")
    parser.add_argument("--remote-write", choices=("true", "false"), default="true")
    args = parser.parse_args(argv)
    spec = load_spec(args.spec)
    if args.print_settings:
        enabled = "true" if spec.observability.enabled else "false"
        print(f"{enabled} {remote_write_parameter(spec.name)} {spec.region}")
        return
    if args.print_binaries:
        for name, entry in manifest(Path(os.environ.get("OBSERVABILITY_MANIFEST", MANIFEST))).items():
            roles = entry["roles"]
            installed_here = isinstance(roles, list) and args.role in roles
            use = "install" if installed_here else "stage"  # staged on shared storage for other nodes
            print(name, entry["version"], Path(str(entry["url"])).name, entry["sha256"] or "-", entry["binary"], use)
        return
    if args.out is None:
        parser.error("--out is required to write the units")
    args.out.mkdir(parents=True, exist_ok=True)
    units = render_units(
        args.role,
        spec.observability,
        release=args.release,
        spec_path=str(args.spec),
        efa=args.efa == "true",
        entries=manifest(Path(os.environ.get("OBSERVABILITY_MANIFEST", MANIFEST))),
        installed=None if args.installed is None else frozenset(filter(None, args.installed.split(","))),
        remote_write=args.remote_write == "true",
    )
    for name, text in units.items():
        (args.out / name).write_text(text)
        print(name)


if __name__ == "__main__":
    main()
