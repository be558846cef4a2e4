"""The deployment spec: loading, validation and derived names. Imports no CDK and no torch."""

from spec.errors import SpecError, SpecProblem, UserError
from spec.load import DEFAULT_SPEC_PATH, load_spec, parse_spec
from spec.model import BUILTIN_ROLES, DatasetSpec, DeploymentSpec

__all__ = [
    "BUILTIN_ROLES",
    "DEFAULT_SPEC_PATH",
    "DatasetSpec",
    "DeploymentSpec",
    "SpecError",
    "SpecProblem",
    "UserError",
    "load_spec",
    "parse_spec",
]
