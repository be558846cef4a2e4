"""Shared helpers for the cluster tests: specs as dicts, edited and parsed."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster.verify.pcluster.runner import REPO_ROOT
from spec import DEFAULT_SPEC_PATH, DeploymentSpec, parse_spec
from tests.environments import ready

EXAMPLES = sorted((REPO_ROOT / "spec" / "examples").glob("*.yaml"))
ALL_SPECS: list[Path] = [DEFAULT_SPEC_PATH, *EXAMPLES]


def spec_dict(path: Path = DEFAULT_SPEC_PATH) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def with_cluster(edit: Callable[[dict[str, Any]], None], path: Path = DEFAULT_SPEC_PATH) -> dict[str, Any]:
    """A spec dict whose cluster section `edit` changed in place."""
    data = copy.deepcopy(spec_dict(path))
    edit(data["cluster"])
    return data


def parse(data: dict[str, Any]) -> DeploymentSpec:
    return parse_spec(data)


@pytest.fixture(scope="session")
def pcluster_venv() -> Path:
    """The isolated aws-parallelcluster environment, built or waited for."""
    return ready("pcluster-venv")
