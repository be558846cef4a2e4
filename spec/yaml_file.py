"""Reading a YAML file for a validated model: the deployment spec and the trainer's job configs share it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from spec.errors import SpecProblem


def read_yaml(path: Path, field: str, error: Callable[[list[SpecProblem]], Exception]) -> Any:
    """The document in `path`. A file that cannot be read or parsed raises `error` with one problem naming
    `field` and the file (with the line and column of a syntax error)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as failure:
        raise error([SpecProblem(field, f"cannot be read: {failure.strerror}", str(path))]) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as failure:
        mark = getattr(failure, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
        raise error([SpecProblem(field, f"is not valid YAML at {where}", str(path))]) from None
