"""A session fixture's product made once per test run, also when pytest-xdist runs the session on several workers.

Each xdist worker runs every session fixture it needs for itself; what must not be made twice (the CDK synth of the
default deployment: a minute of both cores) is made by the first worker under a lock, in the folder the run's
workers share (their basetemps' parent), and read by the others. Without xdist it is an ordinary tmp folder.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.env_cache import exclusive

DONE = ".done"  # written after `make` returned: a failed or killed attempt is made again


def once_per_run(factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """The folder `make` filled, once for the whole run; `make` gets it empty."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        folder = factory.mktemp(name, numbered=True)
        make(folder)
        return folder
    shared = factory.getbasetemp().parent
    folder = shared / name
    with exclusive(shared / f"{name}.lock"):
        if not (folder / DONE).exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            make(folder)
            (folder / DONE).touch()
    return folder
