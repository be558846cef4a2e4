"""The one error type of the submit path."""

from __future__ import annotations

from spec.errors import UserError


class SubmitError(UserError):
    """A job that must not be submitted; str() is one line naming the argument or field and the value."""
