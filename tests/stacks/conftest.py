"""Synthesis helpers for the stack tests; the session fixture `default_assembly` lives in tests/conftest.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spec import DeploymentSpec

REPO = Path(__file__).resolve().parents[2]
CDK_ENV = {
    "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1",
    "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    "CDK_DISABLE_VERSION_CHECK": "1",
    "CDK_DISABLE_CLI_TELEMETRY": "true",
}


@dataclass
class Assembly:
    spec: DeploymentSpec
    out: Path
    templates: dict[str, dict[str, Any]]  # stack key (data, network, ...) -> template
    validation_report: dict[str, Any]
    log: str = ""  # what synth printed on stderr (the app's notes and warnings)

    def resources(self, stack: str, kind: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.templates[stack]["Resources"].items() if v["Type"] == kind}


def cdk_synth(out: Path, spec_path: Path | None = None) -> subprocess.CompletedProcess[str]:
    command = ["npx", "--no-install", "cdk", "synth", "--quiet", "--output", str(out)]
    if spec_path is not None:
        command += ["--context", f"spec={spec_path}"]
    return subprocess.run(command, cwd=REPO, env={**os.environ, **CDK_ENV}, capture_output=True, text=True, timeout=600)


def read_assembly(out: Path, spec: DeploymentSpec, log: str = "") -> Assembly:
    templates = {}
    for key, name in spec.stack_names.items():
        path = out / f"{name}.template.json"
        if path.exists():
            templates[key] = json.loads(path.read_text())
    report = json.loads((out / "validation-report.json").read_text())
    return Assembly(spec, out, templates, report, log)


from tests.cluster.conftest import pcluster_venv  # noqa: E402,F401  (the isolated ParallelCluster venv)


def cfn_lint_errors(templates: list[str]) -> list[str]:
    """cfn-lint's errors (E rules) on the templates; warnings are printed for the reader but do not count."""
    result = subprocess.run(
        [str(Path(sys.executable).with_name("cfn-lint")), "--format", "parseable", "--", *templates],
        capture_output=True,
        text=True,
    )
    errors = [line for line in result.stdout.splitlines() if ":E" in line]
    if not errors:
        assert result.returncode in (0, 4, 8, 12), result.stderr  # 2 = errors; 4 warnings; 8 informational
    return errors
