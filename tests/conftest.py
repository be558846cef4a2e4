"""Fixtures shared by more than one test package."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

REPO = Path(__file__).resolve().parents[1]

if TYPE_CHECKING:
    from cluster.verify.local_slurm import LocalSlurm
    from tests.stacks.conftest import Assembly


@pytest.fixture(scope="session")
def local_slurm_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSlurm]:
    """The local SLURM cluster (n1, n2 in partition 'local'): started once per session, always stopped."""
    from cluster.verify.local_slurm import LocalSlurm

    if os.geteuid() != 0:
        pytest.skip("the local SLURM cluster needs root (it installs slurm-wlm and runs slurmd)")
    # Eight stand-in GPUs per node, as a p5 has: scripts rendered for a GPU queue request them (--gpus-per-node=8)
    # and run on the local partition; CPU jobs request none and get none.
    cluster = LocalSlurm(tmp_path_factory.mktemp("slurm"), gpus_per_node=8)
    try:
        cluster.up()
        yield cluster
    finally:
        cluster.down()


@pytest.fixture
def local_slurm(local_slurm_session: LocalSlurm) -> LocalSlurm:
    """The session's cluster with no jobs and every node healthy and idle before the test."""
    local_slurm_session.reset()
    return local_slurm_session


@pytest.fixture(scope="session")
def default_assembly(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Assembly]:
    """The default deployment synthesized once per session by the real CDK CLI (with cdk-nag).

    Here rather than in tests/stacks so that the stack tests and the policy tests share one synth.
    """
    from spec import load_spec
    from tests.stacks.conftest import cdk_synth, read_assembly

    out = tmp_path_factory.mktemp("cdk-out")
    result = cdk_synth(out)
    assert result.returncode == 0, f"cdk synth failed:\n{result.stdout}\n{result.stderr}"
    yield read_assembly(out, load_spec(), result.stderr)


@pytest.fixture(scope="session")
def nemo_python() -> Path:
    """The isolated NeMo 2.4.0 environment (.nemo-venv, with its pinned transformers); built with `make nemo-venv`
    when missing."""
    if not (REPO / ".nemo-venv" / ".installed").exists():
        subprocess.run(["make", "--no-print-directory", "nemo-venv"], cwd=REPO, check=True)
    return REPO / ".nemo-venv" / "bin" / "python"


@pytest.fixture(scope="session")
def bridge_python() -> Path:
    """The isolated Megatron Bridge 0.6.0 environment (.bridge-venv, Python 3.12); built with `make bridge-venv`
    when missing."""
    if not (REPO / ".bridge-venv" / ".installed").exists():
        subprocess.run(["make", "--no-print-directory", "bridge-venv"], cwd=REPO, check=True)
    return REPO / ".bridge-venv" / "bin" / "python"
