"""One line per problem, each naming the field path and the offending value."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import ValidationError

# A problem whose value is not worth showing: a rule over the whole document, whose "value" is all of it.
NO_VALUE: Any = object()
# A whole-document rule's message that starts by naming its field ("finetune.init: is required ...").
_NAMED_FIELD = re.compile(r"^([A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)+): (.+)$")


def field_path(loc: Sequence[str | int]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path or "<spec>"


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


class SpecProblem:
    __slots__ = ("message", "path", "value")

    def __init__(self, path: str, message: str, value: Any = None) -> None:
        self.path = path
        self.message = message
        self.value = value

    def __str__(self) -> str:
        if self.value is NO_VALUE:
            return f"{self.path}: {self.message}"
        return f"{self.path}: {_show(self.value)} {self.message}"


class UserError(ValueError):
    """Input the user must fix (a spec, an option, a config, a file): every CLI prints it as `error: <line>`
    and exits 2 (spec.cli.user_errors). str() is one line per problem, each naming the field and the value."""


class SpecError(UserError):
    """A spec that must not be deployed; str() gives one line per problem."""

    def __init__(self, problems: Iterable[SpecProblem], source: str = "spec") -> None:
        self.problems = list(problems)
        self.source = source
        super().__init__("\n".join(f"{source}: {p}" for p in self.problems))


def problems_from_pydantic(error: ValidationError) -> list[SpecProblem]:
    problems = []
    for item in error.errors(include_url=False):
        loc = item["loc"]
        message = item["msg"]
        kind = item["type"]
        if message.startswith("Value error, "):
            message = message[len("Value error, ") :]
        if kind == "missing":
            problems.append(SpecProblem(field_path(loc), "is required but missing", None))
            continue
        if kind == "extra_forbidden":
            problems.append(SpecProblem(field_path(loc), "is not a known key (misspelled?)", item.get("input")))
            continue
        if message and message[0].isupper():
            message = message[0].lower() + message[1:]
        named = _NAMED_FIELD.match(message)
        if named and named.group(1).startswith(field_path(loc) if loc else ""):
            # a section's own rule that names the field it is about: that field, not the section's whole value
            problems.append(SpecProblem(named.group(1), named.group(2), NO_VALUE))
            continue
        if not loc:  # a rule over the whole document: its "value" is all of it
            problems.append(SpecProblem("<spec>", message, NO_VALUE))
            continue
        problems.append(SpecProblem(field_path(loc), message, item.get("input")))
    return problems


def not_utf8_text(failure: UnicodeDecodeError) -> str:
    """The message for a file that is not UTF-8 text (Latin-1, UTF-16, binary), naming the first bad byte."""
    return f"is not UTF-8 text (byte 0x{failure.object[failure.start]:02x} at offset {failure.start})"
