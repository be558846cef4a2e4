"""cluster/bootstrap/observability.sh run for real in a node root under tmp_path: sha256-checked binaries, the units
each node kind gets, and the head node's agent config (promtool's own check, agent mode)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from cluster.observability.units import manifest
from cluster.verify.local_observability import ensure_prometheus
from tests.cluster.archives import deb_package

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "cluster" / "bootstrap" / "observability.sh"
REMOTE_WRITE = "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-12345678-abcd-ef01-2345-6789abcdef01/api/v1/remote_write"


def _tarball(path: Path, member: str) -> str:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        data = b"#!/bin/sh\necho fake exporter\n"
        info = tarfile.TarInfo(member)
        info.size, info.mode = len(data), 0o755
        archive.addfile(info, io.BytesIO(data))
    path.write_bytes(buffer.getvalue())
    return hashlib.sha256(buffer.getvalue()).hexdigest()


@pytest.fixture
def node(tmp_path: Path) -> dict[str, Path]:
    """A release on 'shared storage' (the repo's packages, this venv's Python), staged binaries, fake aws/systemctl."""
    release = tmp_path / "fsx" / "llm-training"
    (release / ".venv" / "bin").mkdir(parents=True)
    (release / ".venv" / "bin" / "python").write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    (release / ".venv" / "bin" / "python").chmod(0o755)
    for package in ("cluster", "spec", "training", "policies"):
        (release / package).symlink_to(REPO / package)
    (release / "deployment.yaml").write_text((REPO / "spec" / "default.yaml").read_text())
    binaries = tmp_path / "binaries"
    binaries.mkdir()
    entries = manifest()
    for name in ("node_exporter", "prometheus"):
        url_file = Path(str(entries[name]["url"])).name
        if url_file.endswith(".deb"):  # the agent is Debian's package (binaries.json)
            body = b"#!/bin/sh\necho fake agent\n"
            deb = deb_package(binaries / url_file, {str(entries[name]["binary"]): body})
            entries[name]["sha256"] = hashlib.sha256(deb.read_bytes()).hexdigest()
        else:
            entries[name]["sha256"] = _tarball(binaries / url_file, str(entries[name]["binary"]))
    entries["dcgm_exporter"]["sha256"] = None
    (tmp_path / "manifest.json").write_text(json.dumps(entries))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "aws").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/aws.log\necho {REMOTE_WRITE}\n')
    (bin_dir / "systemctl").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/systemctl.log\n')
    for tool in ("aws", "systemctl"):
        (bin_dir / tool).chmod(0o755)
    return {"root": tmp_path / "root", "release": release, "binaries": binaries, "tmp": tmp_path, "bin": bin_dir}


def _run(node: dict[str, Path], *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "NODE_ROOT": str(node["root"]),
        "AWS": str(node["bin"] / "aws"),
        "SYSTEMCTL": str(node["bin"] / "systemctl"),
        "OBSERVABILITY_MANIFEST": str(node["tmp"] / "manifest.json"),
    }
    argv = ["bash", str(SCRIPT), "--release", str(node["release"]), "--binaries", str(node["binaries"]), *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, check=False)


def test_the_head_node_gets_verified_binaries_the_exporters_and_a_sigv4_agent_that_promtool_accepts(
    node: dict[str, Path],
) -> None:
    stage = node["tmp"] / "fsx" / "llm-training.observability"
    result = _run(node, "--role", "head", "--stage", str(stage))
    assert result.returncode == 0, result.stderr
    units = sorted(p.name for p in (node["root"] / "etc" / "systemd" / "system").iterdir())
    assert units == [
        "llm-node-exporter.service", "llm-prometheus-agent.service", "llm-prometheus-targets.service",
        "llm-slurm-exporter.service",
    ]  # fmt: skip
    assert (node["root"] / "opt" / "llm-observability" / "node_exporter-1.8.2" / "node_exporter").is_file()
    assert "enable --now" in (node["tmp"] / "systemctl.log").read_text()
    assert (
        "ssm get-parameter --region us-east-1 --name /llm-demo/observability/remote-write-url"
        in (node["tmp"] / "aws.log").read_text()
    )
    config = node["root"] / "etc" / "llm-prometheus" / "prometheus.yml"
    ensure_prometheus()
    check = subprocess.run(["promtool", "check", "config", "--agent", str(config)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "sigv4" in config.read_text()
    assert sorted(p.name for p in stage.iterdir()) == sorted(
        Path(str(manifest()[name]["url"])).name for name in ("node_exporter", "prometheus")
    )
    agent = (node["root"] / "etc/systemd/system/llm-prometheus-agent.service").read_text()
    assert "--enable-feature=agent" in agent


def test_a_binary_whose_sha256_differs_from_the_pin_stops_the_script(node: dict[str, Path]) -> None:
    name = Path(str(manifest()["node_exporter"]["url"])).name
    with (node["binaries"] / name).open("ab") as tampered:
        tampered.write(b"\0")
    result = _run(node, "--role", "cpu")
    assert result.returncode == 1
    assert f"observability: {name}: sha256 " in result.stderr and "is not the pinned" in result.stderr
    assert not (node["root"] / "opt" / "llm-observability" / "node_exporter-1.8.2").exists()


def test_gpu_nodes_run_the_efa_exporter_and_skip_an_unpinned_dcgm_exporter_loudly(node: dict[str, Path]) -> None:
    result = _run(node, "--role", "gpu", "--efa", "true")
    assert result.returncode == 0, result.stderr
    assert "WARNING: dcgm_exporter 3.3.9-3.6.1 has no sha256" in result.stderr
    units = sorted(p.name for p in (node["root"] / "etc" / "systemd" / "system").iterdir())
    assert units == ["llm-efa-exporter.service", "llm-node-exporter.service"]
    efa = (node["root"] / "etc/systemd/system/llm-efa-exporter.service").read_text()
    assert f"{node['release']}/.venv/bin/python -m cluster.observability.efa_exporter --port 9101" in efa


def test_trn1_nodes_pipe_neuron_monitor_into_the_neuron_tools_prometheus_script(node: dict[str, Path]) -> None:
    result = _run(node, "--role", "trn1", "--efa", "true")
    assert result.returncode == 0, result.stderr
    unit = (node["root"] / "etc/systemd/system/llm-neuron-monitor.service").read_text()
    assert "/opt/aws/neuron/bin/neuron-monitor | /opt/aws/neuron/bin/neuron-monitor-prometheus.py --port 8000" in unit


def test_gpu_node_starts_its_exporters_from_the_release_and_binaries_the_head_node_staged(
    node: dict[str, Path], tmp_path: Path
) -> None:
    """No new OnNodeConfigured argument: gpu_node.sh finds observability.sh in the release on --shared-dir."""
    from tests.cluster.test_bootstrap import GPU_ARGS, fixture_node, run

    shared = node["tmp"] / "fsx"
    staged = shared / "llm-training.observability"
    staged.mkdir()
    for path in node["binaries"].iterdir():
        (staged / path.name).write_bytes(path.read_bytes())
    env = fixture_node(tmp_path / "gpu", efa=32, gpus=8)
    env.update(
        SYSTEMCTL=str(node["bin"] / "systemctl"), AWS=str(node["bin"] / "aws"),
        OBSERVABILITY_MANIFEST=str(node["tmp"] / "manifest.json"),
    )  # fmt: skip
    result = run("gpu_node.sh", [*GPU_ARGS, "--shared-dir", str(shared)], env)
    assert result.returncode == 0, result.stderr
    units = sorted(p.name for p in (tmp_path / "gpu" / "root" / "etc" / "systemd" / "system").iterdir())
    assert units == ["llm-efa-exporter.service", "llm-node-exporter.service"]


def test_staging_refuses_a_file_that_is_not_the_pinned_one_and_reports_unpinned_entries(tmp_path: Path) -> None:
    from cluster.observability.fetch_binaries import stage

    upstream = tmp_path / "upstream"
    upstream.mkdir()
    good = _tarball(upstream / "good.tar.gz", "good/bin")
    _tarball(upstream / "bad.tar.gz", "bad/bin")
    _tarball(upstream / "new.tar.gz", "new/bin")
    entries = {
        "good": {"version": "1", "url": (upstream / "good.tar.gz").as_uri(), "sha256": good, "binary": "good/bin"},
        "bad": {"version": "2", "url": (upstream / "bad.tar.gz").as_uri(), "sha256": "0" * 64, "binary": "bad/bin"},
        "new": {"version": "3", "url": (upstream / "new.tar.gz").as_uri(), "sha256": None, "binary": "new/bin"},
    }
    (tmp_path / "manifest.json").write_text(json.dumps(entries))
    staged, problems = stage(tmp_path / "out", tmp_path / "manifest.json")
    assert staged == ["good.tar.gz"] and sorted(p.name for p in (tmp_path / "out").iterdir()) == ["good.tar.gz"]
    assert problems[0].startswith("bad 2: sha256 ") and problems[0].endswith(f"is not the pinned {'0' * 64}")
    assert problems[1].startswith("new 3: not pinned; measured sha256 ")
