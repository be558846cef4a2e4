"""SFT rows from JSONL: {"prompt", "response"} or {"messages": [{"role", "content"}, ...]}, each as messages.

A prompt/response row is the conversation [user: prompt, assistant: response], so both formats go through the
same template. Every refusal is one line naming file:line and the field.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from training.data.errors import DataError
from training.sft.template import Message

ROLES = ("system", "user", "assistant", "tool")


@dataclass(frozen=True)
class Row:
    file_index: int
    where: str  # file:line, for errors
    messages: list[Message]


def iter_rows(files: Sequence[Path]) -> Iterator[Row]:
    for file_index, path in enumerate(files):
        if path.suffix not in (".jsonl", ".json"):
            raise DataError(f"--input: {path}: SFT rows are JSONL (.jsonl or .json), not {path.suffix!r}")
        with path.open("rb") as handle:
            for line_number, raw in enumerate(handle, start=1):
                if not raw.strip():
                    continue
                where = f"{path}:{line_number}"
                try:
                    record = json.loads(raw)
                except (json.JSONDecodeError, UnicodeDecodeError) as error:
                    raise DataError(f"{where}: not valid JSON: {error}") from None
                yield Row(file_index, where, messages_of(record, where))


def messages_of(record: Any, where: str) -> list[Message]:
    if not isinstance(record, dict):
        raise DataError(f"{where}: a row must be a JSON object, found {type(record).__name__}")
    if "messages" in record:
        return _checked_messages(record["messages"], where)
    if "prompt" in record or "response" in record:
        prompt, response = (_text(record, key, where, f"{key}: ") for key in ("prompt", "response"))
        if not response.strip():
            raise DataError(f"{where}: response: empty")
        return [{"role": "user", "content": prompt}, {"role": "assistant", "content": response}]
    raise DataError(f"{where}: neither 'messages' nor 'prompt'/'response' (keys: {sorted(record)[:8]})")


def _text(record: dict[str, Any], key: str, where: str, field: str) -> str:
    if key not in record:
        raise DataError(f"{where}: {field}missing")
    value = record[key]
    if not isinstance(value, str):
        raise DataError(f"{where}: {field}{type(value).__name__} {str(value)[:40]!r}, expected a string")
    return value


def _checked_messages(messages: Any, where: str) -> list[Message]:
    if not isinstance(messages, list):
        raise DataError(f"{where}: messages: {type(messages).__name__}, expected a list of {{role, content}}")
    if not messages:
        raise DataError(f"{where}: messages: empty")
    checked: list[Message] = []
    for index, message in enumerate(messages):
        field = f"messages[{index}]"
        if not isinstance(message, dict):
            raise DataError(f"{where}: {field}: {type(message).__name__}, expected an object with role and content")
        role = _text(message, "role", where, f"{field}.role: ")
        if role not in ROLES:
            raise DataError(f"{where}: {field}.role: {role!r} is not one of {list(ROLES)}")
        content = _text(message, "content", where, f"{field}.content: ")
        if role == "assistant" and not content.strip():
            raise DataError(f"{where}: {field}.content: empty assistant message")
        checked.append({"role": role, "content": content})
    if not any(message["role"] == "assistant" for message in checked):
        raise DataError(f"{where}: messages: no assistant message, so nothing to train on")
    return checked
