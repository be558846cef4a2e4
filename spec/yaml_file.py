"""Reading a YAML file for a validated model: the deployment spec, phase two and the trainer's job configs share it.

Every way a file can be unfit is one problem naming the file: unreadable, not UTF-8 text, not YAML, nested past
the parser's recursion, or larger once its aliases are expanded than any real spec (a "billion laughs" alias
bomb: a few lines that validation and error messages would expand into billions of values).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from spec.errors import SpecProblem, not_utf8_text

# A spec or job config has a few hundred values; this is far above any real one and far below harm.
MAX_EXPANDED_NODES = 100_000

ErrorFactory = Callable[[list[SpecProblem]], Exception]


class _SelfReference(Exception):
    pass


class _TooLarge(Exception):
    pass


def expanded_size(root: yaml.Node, limit: int = MAX_EXPANDED_NODES) -> int:
    """How many nodes the document holds with every alias expanded, computed once per distinct node (an alias
    is a shared node), so a bomb costs its own size to measure. Raises _TooLarge past `limit`, _SelfReference
    for a node that contains itself."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_nodes:
            raise _SelfReference
        open_nodes.add(key)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(size(item) for item in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(size(k) + size(v) for k, v in node.value)
        open_nodes.discard(key)
        if total > limit:
            raise _TooLarge
        sizes[key] = total
        return total

    return size(root)


def read_text(path: Path, field: str, error: ErrorFactory) -> str:
    """The file's text; unreadable or not UTF-8 (Latin-1, UTF-16, binary) raises `error` naming `field` and it."""
    try:
        data = path.read_bytes()
    except OSError as failure:
        raise error([SpecProblem(field, f"cannot be read: {failure.strerror}", str(path))]) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as failure:
        raise error([SpecProblem(field, not_utf8_text(failure), str(path))]) from None


def parse_yaml(text: str, field: str, source: str, error: ErrorFactory) -> Any:
    """The document in `text` (read from `source`), bounded in size; any unfit document raises `error`."""

    def refuse(message: str) -> Exception:
        return error([SpecProblem(field, message, source)])

    loader: yaml.SafeLoader | None = None
    try:
        loader = yaml.SafeLoader(text)  # its reader refuses control characters (NUL) already here
        root = loader.get_single_node()
        if root is None:
            return None
        expanded_size(root)
        return loader.construct_document(root)
    except yaml.YAMLError as failure:
        mark = getattr(failure, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
        raise refuse(f"is not valid YAML at {where}") from None
    except RecursionError:
        raise refuse("nests too deeply to be a spec or job config") from None
    except _SelfReference:
        raise refuse("has an alias that refers to itself") from None
    except _TooLarge:
        raise refuse(f"expands to more than {MAX_EXPANDED_NODES} values (its aliases repeat too much)") from None
    finally:
        if loader is not None:
            loader.dispose()


def read_yaml(path: Path, field: str, error: ErrorFactory) -> Any:
    """The document in `path`. A file that cannot be read or parsed raises `error` with one problem naming
    `field` and the file (with the line and column of a syntax error)."""
    return parse_yaml(read_text(path, field, error), field, str(path), error)
