"""Building blocks shared by every section of the spec (spec.model and spec.cluster)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, BeforeValidator, ConfigDict


class StrictModel(BaseModel):
    """Unknown keys are errors: a misspelled key must not silently fall back to a default."""

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)


def matches(regex: re.Pattern[str], what: str) -> BeforeValidator:
    """A string field that must match `regex`; the error says what it must be."""

    def check(value: Any) -> Any:
        if not isinstance(value, str) or not regex.match(value):
            raise ValueError(f"must be {what}")
        return value

    return BeforeValidator(check)
