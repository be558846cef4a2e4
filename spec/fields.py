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


def check_bucket_name(name: str, *, dots: bool = False) -> str:
    """S3's general-purpose bucket naming rules. `dots=False` (the buckets this repo creates) refuses dots too:
    they break TLS for virtual-hosted requests, and every request here is TLS-only."""
    if not 3 <= len(name) <= 63:
        raise ValueError("must be 3-63 characters")
    allowed = r"[a-z0-9][a-z0-9.-]*[a-z0-9]" if dots else r"[a-z0-9][a-z0-9-]*[a-z0-9]"
    if not re.fullmatch(allowed, name):
        raise ValueError(
            f"may hold only lowercase letters, digits{', dots' if dots else ''} and hyphens, and must begin and end "
            "with a letter or digit"
        )
    if ".." in name:
        raise ValueError("must not hold two adjacent dots")
    if re.fullmatch(r"\d+\.\d+\.\d+\.\d+", name):
        raise ValueError("must not be formatted as an IP address")
    for prefix in ("xn--", "sthree-", "amzn-s3-demo-"):
        if name.startswith(prefix):
            raise ValueError(f"must not begin with '{prefix}' (reserved by S3)")
    for suffix in ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"):
        if name.endswith(suffix):
            raise ValueError(f"must not end with '{suffix}' (reserved by S3)")
    return name
