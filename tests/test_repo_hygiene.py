"""House rules that CI enforces: ruff clean, every dependency pinned exactly."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUFF = str(Path(sys.executable).with_name("ruff"))


def _tracked(pattern: str) -> list[str]:
    # What is committed is what CI and users get; work in progress beside it is not judged here.
    listed = subprocess.run(["git", "ls-files", pattern], cwd=REPO, capture_output=True, text=True, check=True)
    return [name for name in listed.stdout.splitlines() if (REPO / name).exists()]


def _tracked_python_files() -> list[str]:
    return _tracked("*.py")


def test_ruff_check_is_clean() -> None:
    result = subprocess.run(
        [RUFF, "check", "--no-cache", *_tracked_python_files()], cwd=REPO, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_clean() -> None:
    result = subprocess.run(
        # Markdown too: ruff formats the Python code blocks of the docs (`make lint` checks them).
        [RUFF, "format", "--check", "--no-cache", *_tracked_python_files(), *_tracked("*.md")],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_python_requirements_are_pinned_exactly() -> None:
    for name in ("requirements.txt", "constraints.txt"):
        for line in (REPO / name).read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                # An exact version may carry a PEP 440 epoch (N!): grafana-foundation-sdk's releases all do.
                assert re.fullmatch(r"[A-Za-z0-9_.\-\[\],]+==(?:[0-9]+!)?[A-Za-z0-9_.+\-]+", line), (
                    f"{name}: {line!r} is not pinned"
                )


def test_torch_is_the_cpu_build_on_disk() -> None:
    assert "torch==2.13.0" in (REPO / "requirements.txt").read_text().splitlines()


def test_node_dependencies_are_pinned_exactly_and_locked() -> None:
    package = json.loads((REPO / "package.json").read_text())
    lock = json.loads((REPO / "package-lock.json").read_text())
    for name, version in {**package.get("dependencies", {}), **package.get("devDependencies", {})}.items():
        assert re.fullmatch(r"\d+\.\d+\.\d+", version), f"package.json: {name} {version!r} is not an exact version"
        assert lock["packages"][f"node_modules/{name}"]["version"] == version
