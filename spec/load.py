"""Loading a spec file (or the embedded default) into a validated DeploymentSpec."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from spec.checks import cross_field_problems
from spec.errors import SpecError, SpecProblem, problems_from_pydantic
from spec.model import DeploymentSpec
from spec.yaml_file import read_yaml

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


# Top-level keys only a job config (training/configs/) has: one given as a spec is named as such.
_JOB_CONFIG_ONLY_KEYS = frozenset({"train", "model"})


def load_spec(path: str | Path | None = None) -> DeploymentSpec:
    """Load `path`, or the embedded default spec when no path is given."""
    spec_path = Path(path) if path else DEFAULT_SPEC_PATH
    data = read_yaml(spec_path, "<file>", SpecError)
    if isinstance(data, dict) and _JOB_CONFIG_ONLY_KEYS & set(data) and "accounts" not in data:
        problem = SpecProblem(
            "<file>", "is a job config (llm-submit --model takes it), not a deployment spec", str(spec_path)
        )
        raise SpecError([problem], source=str(spec_path))
    return parse_spec(data, source=str(spec_path))
