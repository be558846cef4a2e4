"""Call the scripts of this folder under .pcluster-venv's interpreter (JSON in, JSON out)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[3]
PCLUSTER_VENV = REPO_ROOT / ".pcluster-venv"
_HERE = Path(__file__).resolve().parent


class PclusterUnavailable(RuntimeError):
    """The isolated environment is missing; `make pcluster-venv` creates it."""


def pcluster_python() -> Path:
    python = PCLUSTER_VENV / "bin" / "python"
    if not python.exists():
        raise PclusterUnavailable(f"{python} is missing; run `make pcluster-venv`")
    return python


def run_script(script: str, request: Any, timeout_s: float = 120) -> Any:
    """Run cluster/verify/pcluster/<script> with `request` as JSON on stdin; returns its parsed JSON output."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("AWS_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(AWS_DEFAULT_REGION="us-east-1", AWS_ACCESS_KEY_ID="offline", AWS_SECRET_ACCESS_KEY="offline")
    completed = subprocess.run(
        [str(pcluster_python()), str(_HERE / script)],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"{script} failed ({completed.returncode}): {completed.stderr.strip()[-2000:]}")
    return json.loads(completed.stdout)


def schema_errors(configs: Mapping[str, Mapping[str, Any]], kind: str = "cluster") -> dict[str, Any]:
    """name -> marshmallow's error dict (None when valid), for each config, in one subprocess."""
    request = [{"kind": kind, "name": name, "config": config} for name, config in configs.items()]
    return {item["name"]: item["errors"] for item in run_script("validate_config.py", request)}


def update_policies(paths: Sequence[str] | None = None) -> dict[str, str]:
    """ParallelCluster's update policy name for every schema path (or just `paths`)."""
    result: dict[str, str] = run_script("dump_update_policies.py", {"paths": list(paths) if paths else None})
    return result


def node_policies(request: Mapping[str, Any]) -> dict[str, Any]:
    """What ParallelCluster's builders grant the node roles it would create (node_policies.py)."""
    result: dict[str, Any] = run_script("node_policies.py", request, timeout_s=300)
    return result
