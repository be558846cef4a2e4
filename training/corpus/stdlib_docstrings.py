"""English text that every Python install carries: the docstrings of the standard library.

Sources are parsed with `ast`, never imported (importing all of the stdlib opens browsers and windows and prints
poems), in sorted path order, so the corpus is the same on every machine with the same Python version.
One document per module: the module's name and docstring, then each class and function docstring under its
qualified name. A docstring seen before (inherited boilerplate such as "Return self==value.") is left out.
"""

import ast
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# Test suites and third-party installs are not the standard library's prose.
EXCLUDED_DIRECTORIES = frozenset(
    {"site-packages", "dist-packages", "test", "tests", "idle_test", "__pycache__", "turtledemo", "ensurepip"}
)
MIN_WORDS = 3

_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass(frozen=True)
class ModuleDocument:
    module: str
    text: str


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def module_sources(root: Path) -> list[tuple[str, Path]]:
    """(dotted module name, source path) for every stdlib .py file, sorted by path."""
    found = []
    for path in sorted(root.rglob("*.py"), key=lambda p: p.relative_to(root).as_posix()):
        relative = path.relative_to(root)
        parts = list(relative.with_suffix("").parts)
        # Directories such as config-3.11-x86_64-linux-gnu are not importable packages.
        if EXCLUDED_DIRECTORIES.intersection(parts[:-1]) or not all(part.isidentifier() for part in parts):
            continue
        if parts[-1] == "__init__":
            parts.pop()
        found.append((".".join(parts), path))
    return found


def _docstrings(node: ast.AST, qualified_name: str) -> Iterator[tuple[str, str]]:
    """(qualified name, docstring) in source order, depth first."""
    if isinstance(node, _DOCUMENTED):
        docstring = ast.get_docstring(node, clean=True)
        if docstring:
            yield qualified_name, docstring
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            yield from _docstrings(child, f"{qualified_name}.{child.name}")


def iter_module_documents(root: Path | None = None) -> Iterator[ModuleDocument]:
    seen: set[str] = set()
    for module, path in module_sources(root or stdlib_root()):
        try:
            tree = ast.parse(path.read_bytes(), filename=str(path))
        except (SyntaxError, ValueError):
            continue  # a few stdlib files are deliberately invalid (grammar test data)
        sections = []
        for name, docstring in _docstrings(tree, module):
            if docstring in seen or len(docstring.split()) < MIN_WORDS:
                continue
            seen.add(docstring)
            sections.append(f"{name}\n\n{docstring}")
        if sections:
            yield ModuleDocument(module=module, text="\n\n".join(sections) + "\n")


def iter_docstrings(root: Path | None = None) -> Iterator[tuple[str, str]]:
    """(qualified name, docstring) of every module, class and function the corpus reads, in corpus order."""
    for module, path in module_sources(root or stdlib_root()):
        try:
            tree = ast.parse(path.read_bytes(), filename=str(path))
        except (SyntaxError, ValueError):
            continue
        yield from _docstrings(tree, module)
