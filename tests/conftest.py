"""Fixtures shared by more than one test package."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.durations import Durations
from tests.environments import ready
from tests.once_per_run import once_per_run
from tests.scheduling import ordered

REPO = Path(__file__).resolve().parents[1]

if TYPE_CHECKING:
    from cluster.verify.local_slurm import LocalSlurm
    from tests.stacks.conftest import Assembly


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist) sees every report
        config.pluginmanager.register(Durations(), "llm-test-durations")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under xdist, long files first: the workers take files in this order and so end together (tests/scheduling.py).
    Every worker collects the same items and orders them alike, as xdist requires."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items[:] = ordered(items)


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

    def synthesize(folder: Path) -> None:
        result = cdk_synth(folder / "cdk.out")
        assert result.returncode == 0, f"cdk synth failed:\n{result.stdout}\n{result.stderr}"
        (folder / "synth.log").write_text(result.stderr)

    # Once per run: under xdist the first worker synthesizes and the others read its assembly.
    folder = once_per_run(tmp_path_factory, "cdk-out", synthesize)
    yield read_assembly(folder / "cdk.out", load_spec(), (folder / "synth.log").read_text())


@pytest.fixture(scope="session")
def nemo_python() -> Path:
    """The isolated NeMo 2.4.0 environment (.nemo-venv, with its pinned transformers), built or waited for."""
    return ready("nemo-venv") / "bin" / "python"


@pytest.fixture(scope="session")
def bridge_python() -> Path:
    """The isolated Megatron Bridge 0.6.0 environment (.bridge-venv, Python 3.12), built or waited for."""
    return ready("bridge-venv") / "bin" / "python"
