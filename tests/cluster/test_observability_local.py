"""`python -m cluster.verify.local_observability watch` refuses, in one line and before it installs or starts anything,
to run without the local SLURM cluster it scrapes (SLURM_CONF)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cluster.verify import local_observability as local

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def nothing_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse() -> None:
        raise AssertionError("watch went on to install/start Prometheus")

    monkeypatch.setattr(local, "ensure_prometheus", refuse)


def test_watch_without_slurm_conf_is_one_error_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], nothing_starts: None
) -> None:
    monkeypatch.delenv("SLURM_CONF", raising=False)
    assert local.main(["watch", "--dir", str(tmp_path / "prom"), "--", "true"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: SLURM_CONF: ")
    assert "python -m cluster.verify.local_slurm up" in line
    assert not (tmp_path / "prom").exists()


def test_watch_with_a_missing_slurm_conf_names_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], nothing_starts: None
) -> None:
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "nope" / "slurm.conf"))
    assert local.main(["watch", "--dir", str(tmp_path / "prom"), "--", "true"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: SLURM_CONF: '{tmp_path / 'nope' / 'slurm.conf'}' ")


def test_the_module_run_by_hand_prints_no_traceback(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(tmp_path)}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "cluster.verify.local_observability",
            "watch",
            "--dir",
            str(tmp_path / "p"),
            "--",
            "true",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: SLURM_CONF: ") and len(result.stderr.splitlines()) == 1, result.stderr


def test_watch_with_a_state_dir_where_no_cluster_runs_is_one_line_naming_what_to_run(tmp_path: Path) -> None:
    """SLURM_CONF names a local cluster's config, but its controller does not run (never started, or `down`)."""
    state = tmp_path / "local-slurm"
    state.mkdir()
    (port,) = local.free_ports(1)  # nothing listens there
    (state / "slurm.conf").write_text(
        "ClusterName=local\nSlurmctldHost=localhost(127.0.0.1)\n"
        f"SlurmctldPort={port}\nAuthType=auth/none\nCredType=cred/none\nMessageTimeout=2\n"
        "NodeName=n1 NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN\nPartitionName=local Nodes=ALL Default=YES\n"
    )
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(REPO),
        "HOME": str(tmp_path),
        "SLURM_CONF": str(state / "slurm.conf"),
    }
    result = subprocess.run(
        [sys.executable, "-m", "cluster.verify.local_observability", "watch", "--dir", "prom", "--", "true"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: SLURM_CONF: '{state / 'slurm.conf'}' ") and "Traceback" not in result.stderr
    assert "python -m cluster.verify.local_slurm up" in line
    assert not (tmp_path / "prom").exists()  # refused before it started anything
