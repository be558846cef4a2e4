"""The packages are layers and imports go one way: a module may import its own package and the layers below
it, never one above. Every import counts, including the lazy ones inside functions (docs/architecture.md).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from cluster.payload import PACKAGES

REPO = Path(__file__).resolve().parents[1]

# Lowest first. slurm knows nothing of what runs in a job; training and cluster both build on it.
LAYERS: tuple[str, ...] = ("spec", "policies", "slurm", "training", "cluster", "stacks", "app", "bench", "tests")
# Inside spec: the platform facts and rules sit below the rest of the spec except the leaf modules they use.
SPEC_PLATFORM_MAY_IMPORT = ("spec.platform", "spec.cluster", "spec.errors")


def _modules(package: str) -> list[Path]:
    if package == "app":
        return [REPO / "app.py"]
    return sorted(path for path in (REPO / package).rglob("*.py") if "__pycache__" not in path.parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) for every import statement anywhere in the file."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


def back_edges(layers: tuple[str, ...] = LAYERS) -> list[str]:
    rank = {name: index for index, name in enumerate(layers)}
    problems = []
    for package in layers:
        for path in _modules(package):
            for line, module in _imports(path):
                top = module.split(".")[0]
                if top in rank and rank[top] > rank[package]:
                    problems.append(f"{path.relative_to(REPO)}:{line}: {package} imports {module} (a higher layer)")
    return problems


def test_every_import_goes_down_the_layers() -> None:
    assert back_edges() == []


def test_spec_platform_imports_only_the_spec_leaves() -> None:
    problems = []
    for path in _modules("spec/platform"):
        for line, module in _imports(path):
            if module.split(".")[0] == "spec" and not module.startswith(SPEC_PLATFORM_MAY_IMPORT):
                problems.append(f"{path.relative_to(REPO)}:{line}: {module}")
    assert problems == []


def test_every_package_has_a_layer() -> None:
    packages = {path.parent.name for path in REPO.glob("*/__init__.py")}
    assert packages - set(LAYERS) == set(), "add the new package to LAYERS and docs/architecture.md"


@pytest.mark.parametrize("package", PACKAGES)
def test_the_head_node_payload_holds_what_its_packages_import(package: str) -> None:
    problems = [
        f"{path.relative_to(REPO)}:{line}: {module}"
        for path in _modules(package)
        for line, module in _imports(path)
        if module.split(".")[0] in LAYERS and module.split(".")[0] not in PACKAGES
    ]
    assert problems == []


def test_a_back_edge_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The check itself: a spec module importing cluster is named with its file and line.
    (tmp_path / "spec").mkdir()
    (tmp_path / "spec" / "bad.py").write_text("def f() -> None:\n    from cluster import payload\n")
    monkeypatch.setattr(f"{__name__}.REPO", tmp_path)
    assert back_edges(("spec", "cluster")) == ["spec/bad.py:2: spec imports cluster (a higher layer)"]


def test_the_policy_builders_never_import_their_verification() -> None:
    problems = [
        f"{path.relative_to(REPO)}:{line}: {module}"
        for path in _modules("policies")
        if "verify" not in path.relative_to(REPO).parts
        for line, module in _imports(path)
        if module.startswith("policies.verify")
    ]
    assert problems == []


def test_the_readme_and_the_architecture_doc_name_every_package() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    architecture = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    packages = [f"`{name}/`" for name in LAYERS if name not in ("app", "tests")] + ["`spec/platform/`"]
    assert [name for name in packages if name not in readme] == []
    assert [name for name in packages if name not in architecture and name != "`bench/`"] == []
