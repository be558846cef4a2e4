"""Which package may import which: a table of allowed imports, not a ranking, so two siblings (cluster and
training, planner and launch) cannot reach into each other. Every import counts, including the lazy ones inside
functions and those under TYPE_CHECKING (docs/architecture.md).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from cluster.payload import PACKAGES

REPO = Path(__file__).resolve().parents[1]

# package -> the other packages of the repo it may import (its own is always allowed).
ALLOWED: dict[str, frozenset[str]] = {
    "spec": frozenset(),
    "policies": frozenset({"spec"}),
    "slurm": frozenset({"spec"}),
    "training": frozenset({"spec"}),
    "planner": frozenset({"spec", "slurm", "training"}),
    "launch": frozenset({"spec", "slurm", "training", "planner"}),
    "cluster": frozenset({"spec", "policies", "slurm"}),
    "stacks": frozenset({"spec", "policies", "cluster"}),
    "app": frozenset({"spec", "stacks"}),
}
# Packages that may import any other (they sit outside the product).
ANYTHING = ("bench", "tests")
# The planner runs on a laptop and on the head node, where torch is absent: of the trainer it may read only these
# torch-free descriptions (the job config, the model's shape and parameter count, the model families' descriptors
# and named shapes, the FLOPs formulas it shares with the trainer's MFU). `test_the_planner_imports_with_torch_blocked`
# proves they stay torch-free.
PLANNER_MAY_READ_FROM_TRAINING = (
    "training.config",
    "training.finetune.config",
    "training.parallel.dims",
    "training.models.args",
    "training.models.params",
    "training.models.families",
    "training.models.registry",
    "training.models.neox.configs",
    "training.metrics.flops",
    "training.evaluate.results",
)
# Verification beside what it verifies: nothing outside it in its package imports it.
VERIFY_PACKAGES = ("policies.verify", "cluster.verify")
# Inside spec: the platform facts and rules sit below the rest of the spec except the leaf modules they use.
SPEC_PLATFORM_MAY_IMPORT = ("spec.platform", "spec.cluster", "spec.errors")


def _modules(package: str, root: Path | None = None) -> list[Path]:
    root = root or REPO
    if package == "app":
        return [root / "app.py"]
    return sorted(path for path in (root / package).rglob("*.py") if "__pycache__" not in path.parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) for every import statement anywhere in the file."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


def forbidden_imports(allowed: Mapping[str, frozenset[str]] = ALLOWED, root: Path | None = None) -> list[str]:
    """`file:line: package imports module (allowed: ...)` for every import of a package the table does not allow."""
    root = root or REPO
    problems = []
    for package, may_import in allowed.items():
        for path in _modules(package, root):
            for line, module in _imports(path):
                top = module.split(".")[0]
                if top in ALLOWED and top != package and top not in may_import:
                    names = ", ".join(sorted(may_import)) or "none"
                    problems.append(f"{path.relative_to(root)}:{line}: {package} imports {module} (allowed: {names})")
    return problems


def test_every_import_is_in_the_table() -> None:
    assert forbidden_imports() == []


def test_the_planner_reads_only_the_trainers_descriptions() -> None:
    problems = [
        f"{path.relative_to(REPO)}:{line}: {module}"
        for path in _modules("planner")
        for line, module in _imports(path)
        if module.split(".")[0] == "training" and module not in PLANNER_MAY_READ_FROM_TRAINING
    ]
    assert problems == []


def _dotted(path: Path, root: Path | None = None) -> str:
    return ".".join(path.relative_to(root or REPO).with_suffix("").parts).removesuffix(".__init__")


def _in_verification(module: str) -> bool:
    return any(module == package or module.startswith(package + ".") for package in VERIFY_PACKAGES)


def test_only_verification_imports_verification() -> None:
    # policies' builders and cluster's node code never need their checks; one check may use another's harness.
    problems = [
        f"{path.relative_to(REPO)}:{line}: {module}"
        for package in ALLOWED
        for path in _modules(package)
        if not _in_verification(_dotted(path))
        for line, module in _imports(path)
        if _in_verification(module)
    ]
    assert problems == []


def test_spec_platform_imports_only_the_spec_leaves() -> None:
    problems = []
    for path in _modules("spec/platform"):
        for line, module in _imports(path):
            if module.split(".")[0] == "spec" and not module.startswith(SPEC_PLATFORM_MAY_IMPORT):
                problems.append(f"{path.relative_to(REPO)}:{line}: {module}")
    assert problems == []


def import_cycles(package: str, root: Path | None = None) -> list[list[str]]:
    """Cycles among the modules of a package, every import counted (TYPE_CHECKING and lazy ones too)."""
    root = root or REPO
    graph: dict[str, set[str]] = {}
    for path in _modules(package, root):
        name = _dotted(path, root)
        graph[name] = set()
        for _, module in _imports(path):
            if module.split(".")[0] == package:
                graph[name].add(module)
    for name in graph:
        # `from spec.model import X` names spec.model; `from spec import model` names spec: both are edges.
        graph[name] = {target for target in graph[name] if target in graph and target != name}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                cycles.append([*stack[stack.index(target) :], target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return cycles


def test_the_spec_has_no_import_cycle() -> None:
    # Package __init__ files re-export their modules, so an edge into `spec` itself is not a cycle of the rules.
    assert [cycle for cycle in import_cycles("spec") if "spec" not in cycle] == []


def test_every_package_has_a_row() -> None:
    packages = {path.parent.name for path in REPO.glob("*/__init__.py")}
    assert packages - set(ALLOWED) - set(ANYTHING) == set(), "add the new package to ALLOWED and docs/architecture.md"


@pytest.mark.parametrize("package", PACKAGES)
def test_the_head_node_payload_holds_what_its_packages_import(package: str) -> None:
    problems = [
        f"{path.relative_to(REPO)}:{line}: {module}"
        for path in _modules(package)
        for line, module in _imports(path)
        if module.split(".")[0] in ALLOWED and module.split(".")[0] not in PACKAGES
    ]
    assert problems == []


@pytest.mark.parametrize(
    ("importer", "file", "module"),
    [("cluster", "cluster/bad.py", "training.config"), ("planner", "planner/bad.py", "launch.submit")],
)
def test_a_planted_sibling_import_is_reported_with_file_and_line(
    tmp_path: Path, importer: str, file: str, module: str
) -> None:
    # The check itself: siblings a ranking would let through are named with their file and line.
    (tmp_path / file).parent.mkdir(parents=True)
    (tmp_path / file).write_text(f"def f() -> None:\n    import {module}\n")
    problems = forbidden_imports({importer: ALLOWED[importer]}, root=tmp_path)
    names = ", ".join(sorted(ALLOWED[importer]))
    assert problems == [f"{file}:2: {importer} imports {module} (allowed: {names})"]


def test_a_type_checking_cycle_is_found(tmp_path: Path) -> None:
    (tmp_path / "spec").mkdir()
    (tmp_path / "spec" / "__init__.py").write_text("")
    (tmp_path / "spec" / "a.py").write_text("from spec.b import B\n")
    (tmp_path / "spec" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from spec.a import A\n"
    )
    assert import_cycles("spec", root=tmp_path) == [["spec.a", "spec.b", "spec.a"]]


def test_the_planner_imports_with_torch_blocked() -> None:
    # A finder that refuses torch, as on a laptop or head node without it; every planner module must import.
    modules = sorted(_dotted(path) for path in _modules("planner"))
    script = (
        "import importlib, sys\n"
        "class NoTorch:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'torch' or name.startswith('torch.'):\n"
        "            raise ImportError('torch is blocked')\n"
        "sys.meta_path.insert(0, NoTorch())\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "assert not any(m == 'torch' or m.startswith('torch.') for m in sys.modules)\n"
        "print('ok', len(sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok")


def test_the_readme_and_the_architecture_doc_name_every_package() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    architecture = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    packages = [f"`{name}/`" for name in [*ALLOWED, *ANYTHING] if name not in ("app", "tests")]
    packages += ["`spec/platform/`", "`cluster/verify/`", "`stacks/nag/`"]
    assert [name for name in packages if name not in readme] == []
    assert [name for name in packages if name not in architecture and name != "`bench/`"] == []


def test_the_architecture_docs_picture_draws_the_table() -> None:
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    picture = text.split("```mermaid", 1)[1].split("```", 1)[0]
    drawn: dict[str, set[str]] = {name: set() for name in ALLOWED}
    for line in picture.splitlines():
        match = re.match(r"\s*(\w+)(?:\[[^\]]*\])?\s*-\.?[^>]*>\s*(\w+)", line)
        if match:
            drawn[match.group(1)].add(match.group(2))
    assert drawn == {name: set(allowed) for name, allowed in ALLOWED.items()}
