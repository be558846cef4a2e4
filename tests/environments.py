"""The Makefile's test-only environments (venvs, wheelhouses) as a test asks for them.

`make test` starts pytest as soon as `.venv` and `node_modules` exist and builds the other environments beside it
(tests/suite.py): most of their time is downloads, which the suite's CPU-bound tests can overlap. A test that needs
one calls `ready`, which runs the environment's make target: it returns at once when the environment is there, waits
on the builder's lock (tests/env_cache.py) while `make test` is still building it, and builds it when nothing is
(pytest run by hand). Stdlib only.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# make target -> the folder it fills (the marker inside it is the target's file in the Makefile).
ENVIRONMENTS: dict[str, tuple[str, str]] = {
    "awscli-venv": (".awscli-venv", ".installed"),
    "pcluster-venv": (".pcluster-venv", ".installed"),
    "checkov-venv": (".checkov-venv", ".installed"),
    "torchtitan-venv": (".torchtitan-venv", ".installed"),
    "nemo-venv": (".nemo-venv", ".installed"),
    "bridge-venv": (".bridge-venv", ".installed"),
    "wheelhouse-test": ("build/wheelhouse-test", ".complete"),
    "wheelhouse-node-cpu": ("build/wheelhouse-node-cpu", ".complete"),
}


class UnknownEnvironment(KeyError):
    """A target that is not one of the Makefile's test environments."""


def folder(target: str) -> Path:
    if target not in ENVIRONMENTS:
        raise UnknownEnvironment(f"target: {target!r} is not a test environment ({', '.join(sorted(ENVIRONMENTS))})")
    return REPO / ENVIRONMENTS[target][0]


def is_ready(target: str) -> bool:
    return (folder(target) / ENVIRONMENTS[target][1]).exists()


def ready(target: str) -> Path:
    """The environment's folder, once its build has finished (built or waited for here when it has not)."""
    path = folder(target)
    if not is_ready(target):
        subprocess.run(["make", "--no-print-directory", target], cwd=REPO, check=True)
    return path
