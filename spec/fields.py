"""Building blocks shared by every section of the spec (spec.model and spec.cluster)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, BeforeValidator, ConfigDict


class StrictModel(BaseModel):
    """Unknown keys are errors: a misspelled key must not silently fall back to a default. Values are strict:
    pydantic's lax mode would read a YAML `true` as the integer 1 and `2.0` as 2, and a float may not be NaN or
    infinite (NaN compares false with every bound, so `ge=` would let it through). A field that parses text on
    purpose (a CIDR) says so with `Field(strict=False)`."""

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True, strict=True, allow_inf_nan=False)


def matches(regex: re.Pattern[str], what: str) -> BeforeValidator:
    """A string field that must match `regex`; the error says what it must be."""

    def check(value: Any) -> Any:
        if not isinstance(value, str) or not regex.match(value):
            raise ValueError(f"must be {what}")
        return value

    return BeforeValidator(check)
