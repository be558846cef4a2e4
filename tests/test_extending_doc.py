"""docs/extending.md names the places an addition touches: each named file and test exists, each registry it
names is defined where it says, and its before/after table names the registries a test proves complete."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "extending.md"
_PATH = re.compile(r"`((?:spec|slurm|launch|training|planner|policies|stacks|cluster|tests|docs)/[^`<>* ]+)`")
# (registry, module that defines it): what the doc tells a maintainer to edit.
REGISTRIES = {
    "_ALL": "spec/platform/instances.py",
    "GPUS": "spec/platform/instances.py",
    "CHIPS": "spec/platform/instances.py",
    "BACKENDS": "slurm/backends.py",
    "STACKS": "slurm/backends.py",
    "RENDERERS": "launch/scripts.py",
    "FAMILIES": "training/models/families.py",
    "PRINCIPALS": "policies/principals.py",
    "HF_LINEAR_MODULES": "training/finetune/config.py",
}


def _named_paths() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    return sorted({match.split("::")[0] for match in _PATH.findall(text)})


def test_every_file_the_doc_names_exists() -> None:
    paths = _named_paths()
    assert len(paths) > 20
    missing = [path for path in paths if not (REPO / path).exists()]
    assert missing == []


def test_every_test_function_the_doc_names_exists() -> None:
    text = DOC.read_text(encoding="utf-8")
    named = re.findall(r"`(tests/[^`:]+\.py)::(test_\w+)`", text)
    assert named
    missing = [f"{path}::{name}" for path, name in named if f"def {name}(" not in (REPO / path).read_text()]
    assert missing == []


def test_every_registry_the_doc_names_is_defined_where_it_says() -> None:
    text = DOC.read_text(encoding="utf-8")
    problems = []
    for name, module in REGISTRIES.items():
        if f"`{name}`" not in text:
            problems.append(f"the doc does not name {name}")
        elif not re.search(rf"^{re.escape(name)}\b[^=\n]*=", (REPO / module).read_text(), flags=re.M):
            problems.append(f"{module} does not define {name}")
    assert problems == []
