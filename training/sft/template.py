"""Chat rows -> text pieces, each marked trained or not, through the tokenizer's own chat template.

The template is the Jinja text under `chat_template` in tokenizer_config.json (or a `chat_template.jinja` beside
it), rendered in a sandbox as transformers renders it (trim_blocks, lstrip_blocks, `raise_exception`, `tojson`),
with the tokenizer's special tokens (bos_token, eos_token, ...) as variables. Without one, PLAIN_TEMPLATE.

Which text is trained: for each assistant message, the conversation before it is rendered with the generation
prompt, and the conversation through it without; the difference is the assistant's turn (its content and the
template's end-of-turn text), which is trained. Everything before it, the generation prompt included, is prompt.
A template for which the shorter rendering is not a prefix of the longer (one that rewrites earlier turns) is
refused: its prompt and response cannot be told apart.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

from training.data.errors import DataError

# The documented fallback: a header per message; the assistant's content and the blank line after it are trained.
PLAIN_TEMPLATE = (
    "{% for message in messages %}### {{ message['role'] | capitalize }}:\n{{ message['content'] }}\n\n{% endfor %}"
    "{% if add_generation_prompt %}### Assistant:\n{% endif %}"
)
Message = dict[str, str]
Piece = tuple[str, bool]  # (text, trained)


class TemplateError(Exception):
    """A template that fails on one row; the caller names the row."""


def _raise_exception(message: str) -> None:
    raise TemplateError(message)


def _environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = lambda value, indent=None: json.dumps(value, ensure_ascii=False, indent=indent)
    env.globals["raise_exception"] = _raise_exception
    return env


@dataclass
class ChatTemplate:
    text: str
    special_tokens: dict[str, str]
    source: str  # the file the template came from, or "plain"
    _compiled: jinja2.Template = field(init=False, repr=False)

    def __post_init__(self) -> None:
        try:
            self._compiled = _environment().from_string(self.text)
        except jinja2.TemplateSyntaxError as error:
            raise DataError(f"{self.source}: chat_template: line {error.lineno}: {error.message}") from None

    def render(self, messages: Sequence[Message], add_generation_prompt: bool) -> str:
        try:
            return self._compiled.render(
                messages=list(messages), add_generation_prompt=add_generation_prompt, **self.special_tokens
            )
        except TemplateError:
            raise
        except jinja2.TemplateError as error:
            raise TemplateError(f"{type(error).__name__}: {error}") from None

    def pieces(self, messages: Sequence[Message]) -> list[Piece]:
        """The whole conversation as consecutive pieces; assistant turns are the trained ones."""
        full = self.render(messages, add_generation_prompt=False)
        pieces: list[Piece] = []
        cursor = 0
        for index, message in enumerate(messages):
            if message["role"] != "assistant":
                continue
            before = self.render(messages[:index], add_generation_prompt=True)
            through = self.render(messages[: index + 1], add_generation_prompt=False)
            if not (through.startswith(before) and full.startswith(through) and len(before) >= cursor):
                raise TemplateError(
                    f"the template ({self.source}) renders message {index} differently once later messages follow, "
                    "so its prompt and response cannot be told apart"
                )
            pieces += [(full[cursor : len(before)], False), (through[len(before) :], True)]
            cursor = len(through)
        pieces.append((full[cursor:], False))
        return [(text, trained) for text, trained in pieces if text]


def _token_text(value: Any) -> str | None:
    """A special token as tokenizer_config.json writes it: a string, or an AddedToken dict with `content`."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return str(value["content"])
    return None


def load_chat_template(tokenizer_dir: Path) -> ChatTemplate:
    """The tokenizer directory's chat template (chat_template.jinja, else tokenizer_config.json), else the plain."""
    config_path = tokenizer_dir / "tokenizer_config.json"
    config: dict[str, Any] = {}
    if config_path.is_file():
        try:
            loaded = json.loads(config_path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise DataError(f"{config_path}: not valid JSON: {error}") from None
        if not isinstance(loaded, dict):
            raise DataError(f"{config_path}: must be a JSON object, found {type(loaded).__name__}")
        config = loaded
    special = {
        key: text
        for key, value in config.items()
        if key.endswith("_token") and (text := _token_text(value)) is not None
    }
    jinja_file = tokenizer_dir / "chat_template.jinja"
    if jinja_file.is_file():
        return ChatTemplate(jinja_file.read_text(encoding="utf-8"), special, str(jinja_file))
    template = config.get("chat_template")
    if template is None:
        return ChatTemplate(PLAIN_TEMPLATE, special, "plain")
    if isinstance(template, list):  # named templates: the default one is the chat template
        named = {item.get("name"): item.get("template") for item in template if isinstance(item, dict)}
        template = named.get("default")
    if not isinstance(template, str):
        raise DataError(f"{config_path}: chat_template: {str(template)[:60]!r} is not a Jinja template string")
    return ChatTemplate(template, special, str(config_path))
