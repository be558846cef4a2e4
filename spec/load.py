"""Loading a spec file (or the embedded default) into a validated DeploymentSpec."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from spec.checks import cross_field_problems
from spec.errors import SpecError, SpecProblem, problems_from_pydantic
from spec.model import DeploymentSpec

DEFAULT_SPEC_PATH = Path(__file__).with_name("default.yaml")


def parse_spec(data: Any, source: str = "spec") -> DeploymentSpec:
    """Validate an already-parsed document; raises SpecError with one line per problem."""
    if not isinstance(data, dict):
        raise SpecError([SpecProblem("<spec>", "must be a mapping of keys to values", type(data).__name__)], source)
    try:
        spec = DeploymentSpec.model_validate(data)
    except ValidationError as error:
        raise SpecError(problems_from_pydantic(error), source) from None
    problems = cross_field_problems(spec)
    if problems:
        raise SpecError(problems, source)
    return spec


def load_spec(path: str | Path | None = None) -> DeploymentSpec:
    """Load `path`, or the embedded default spec when no path is given."""
    spec_path = Path(path) if path else DEFAULT_SPEC_PATH
    try:
        text = spec_path.read_text(encoding="utf-8")
    except OSError as error:
        raise SpecError([SpecProblem("<file>", f"cannot be read: {error.strerror}", str(spec_path))]) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
        raise SpecError([SpecProblem("<file>", f"is not valid YAML at {where}", str(spec_path))]) from None
    return parse_spec(data, source=str(spec_path))
