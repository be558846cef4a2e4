"""A second opinion on the synthesized templates: checkov, in its own pinned venv (.checkov-venv).

`make checkov-venv` builds it from policies/verify/checkov/requirements.txt and constraints.txt. Every finding
must be listed, with its reason, in policies/verify/checkov/skips.yaml; an entry that matches no finding any more
is an error too, so the file stays exactly the list of accepted exceptions.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
CHECKOV_VENV = REPO / ".checkov-venv"
SKIPS = REPO / "policies" / "verify" / "checkov" / "skips.yaml"


class CheckovError(RuntimeError):
    """Checkov could not run, or answered something this module does not understand."""


@dataclass(frozen=True)
class Finding:
    check: str
    resource: str  # "<CloudFormation type>.<logical id>"
    template: str
    name: str


@dataclass(frozen=True)
class Skip:
    check: str
    resource: str  # "<CloudFormation type>.<logical id prefix>"
    reason: str

    def covers(self, finding: Finding) -> bool:
        return finding.check == self.check and finding.resource.startswith(self.resource)


def load_skips(path: Path = SKIPS) -> list[Skip]:
    entries = yaml.safe_load(path.read_text()) or []
    skips = []
    for index, entry in enumerate(entries):
        reason = " ".join(str(entry.get("reason", "")).split())
        if len(reason) < 40:
            raise ValueError(f"{path.name}[{index}] ({entry.get('check')}): give the reason it does not apply")
        skips.append(Skip(str(entry["check"]), str(entry["resource"]), reason))
    return skips


def run_checkov(cdk_out: Path, venv: Path = CHECKOV_VENV) -> tuple[str, list[Finding], int]:
    """(checkov version, failed checks, passed count) over every template of the cloud assembly."""
    executable = venv / "bin" / "checkov"
    if not executable.exists():
        raise CheckovError(f"{executable}: not installed; run `make checkov-venv`")
    command = [
        str(executable),
        "--directory",
        str(cdk_out),
        "--framework",
        "cloudformation",
        "--output",
        "json",
        "--quiet",
        "--compact",
        "--skip-download",  # offline: no guidelines or policies from Prisma Cloud
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    # Exit 1 means "some check failed", which the caller judges; anything else is an error.
    if done.returncode not in (0, 1) or not done.stdout.strip():
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise CheckovError(f"checkov exited with {done.returncode}: {tail}")
    reports = json.loads(done.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    findings, passed, version = [], 0, ""
    for report in reports:
        if report.get("check_type") != "cloudformation":
            continue
        version = report["summary"]["checkov_version"]
        passed += report["summary"]["passed"]
        if report["summary"].get("parsing_errors"):
            raise CheckovError(f"checkov could not parse {report['summary']['parsing_errors']} template(s)")
        for failed in report["results"]["failed_checks"]:
            findings.append(
                Finding(failed["check_id"], failed["resource"], failed["file_path"].lstrip("/"), failed["check_name"])
            )
    if not version:
        raise CheckovError("checkov reported no CloudFormation results: were the templates found?")
    return version, findings, passed


def unexplained(findings: list[Finding], skips: list[Skip]) -> list[Finding]:
    return [f for f in findings if not any(s.covers(f) for s in skips)]


def stale(findings: list[Finding], skips: list[Skip]) -> list[Skip]:
    return [s for s in skips if not any(s.covers(f) for f in findings)]
