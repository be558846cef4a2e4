"""Loads a NeMo Framework entry point (launch/jobs/<name>.py) in a contract venv as the container runs it: by path,
its own directory first on sys.path (where it finds its sibling job_contract.py), the repo's packages not importable.
Imported by the probes beside it, which are run by path themselves."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

JOBS = Path(__file__).resolve().parents[3] / "launch" / "jobs"


def load_entry_point(name: str) -> ModuleType:
    sys.path.insert(0, str(JOBS))
    spec = importlib.util.spec_from_file_location(name, JOBS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
