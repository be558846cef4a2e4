"""Set scalar values of one block mapping in a YAML text, changing only those values' characters: comments, key
order, quoting and blank lines of the rest of the file stay as the user wrote them (PyYAML's composer gives each
node's position; no round-trip dumper is needed for a handful of ids)."""

from __future__ import annotations

import re
from collections.abc import Mapping

import yaml

from spec.errors import SpecError, SpecProblem

_PLAIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]*$")


def _scalar_text(value: str | None, style: str | None) -> str:
    if value is None:
        return "null"
    if not _PLAIN.match(value) or value.lower() in ("null", "true", "false", "yes", "no", "on", "off", "~"):
        return "'" + value.replace("'", "''") + "'"
    if style == '"':
        return f'"{value}"'
    if style == "'":
        return f"'{value}'"
    return value


def _line_end(text: str, index: int) -> int:
    """Index just past the newline of the line holding `index` (the text's end if it has none)."""
    newline = text.find("\n", index)
    return len(text) if newline < 0 else newline + 1


def set_scalars(
    text: str, section: str, values: Mapping[str, str | None], source: str = "spec", drop_mark: str | None = None
) -> str:
    """`text` with `section.<key>` set to each of `values` (None writes null). A key that exists keeps its place
    and quoting; a missing one is added on its own line after the section's last scalar entry, at the section's
    indentation. `drop_mark`: a comment after a changed value that starts with it goes with the old value (an
    "# example" mark). Raises SpecError naming `section` when it is not a block mapping at the top of a mapping."""
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as failure:
        mark = getattr(failure, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
        raise SpecError([SpecProblem("<file>", f"is not valid YAML at {where}", source)], source) from None
    if not isinstance(root, yaml.MappingNode):
        raise SpecError([SpecProblem("<spec>", "must be a mapping of keys to values", source)], source)
    found = [value for key, value in root.value if isinstance(key, yaml.ScalarNode) and key.value == section]
    if not found:
        raise SpecError(
            [SpecProblem(section, "is missing: the file needs this section to take the values", None)], source
        )
    node = found[-1]
    if not isinstance(node, yaml.MappingNode) or node.flow_style:
        raise SpecError(
            [SpecProblem(section, "must be a block mapping (one key per line) to be edited here", text_of(text, node))],
            source,
        )
    edits: list[tuple[int, int, str]] = []  # (start, end, replacement), applied from the end
    entries = {key.value: (key, value) for key, value in node.value if isinstance(key, yaml.ScalarNode)}
    missing: list[str] = []
    for name, wanted in values.items():
        if name not in entries:
            missing.append(f"{name}: {_scalar_text(wanted, None)}")
            continue
        key, value = entries[name]
        if not isinstance(value, yaml.ScalarNode):
            raise SpecError(
                [SpecProblem(f"{section}.{name}", "must be a scalar to be set", text_of(text, value))], source
            )
        start, end = value.start_mark.index, value.end_mark.index
        replacement = _scalar_text(wanted, value.style)
        if start == end:  # `key:` with nothing after the colon
            start = end = key.end_mark.index + 1
            replacement = " " + _scalar_text(wanted, None)
        if drop_mark is not None and value.value != wanted:
            rest = text[end : _line_end(text, end)].rstrip("\n")
            if rest.strip().startswith(drop_mark):
                end += len(rest)
        edits.append((start, end, replacement))
    if missing:
        indent = " " * node.value[0][0].start_mark.column
        scalars = [value for _, value in node.value if isinstance(value, yaml.ScalarNode)]
        at = _line_end(text, scalars[-1].end_mark.index) if scalars else node.value[0][0].start_mark.index
        block = "".join(f"{indent}{line}\n" for line in missing)
        if at == len(text) and not text.endswith("\n"):
            block = "\n" + block
        edits.append((at, at, block))
    for start, end, replacement in sorted(edits, reverse=True):
        text = text[:start] + replacement + text[end:]
    return text


def text_of(text: str, node: yaml.Node) -> str:
    """The characters of `node` in `text`, on one line (for an error message)."""
    return " ".join(text[node.start_mark.index : node.end_mark.index].split())
