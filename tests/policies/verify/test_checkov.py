"""checkov over the synthesized templates: zero findings that policies/verify/checkov/skips.yaml does not explain."""

from __future__ import annotations

from pathlib import Path

import pytest

from policies.verify.second_opinion import (
    Finding,
    Skip,
    load_skips,
    run_checkov,
    stale,
    unexplained,
)
from tests.environments import ready
from tests.stacks.conftest import Assembly


@pytest.fixture(scope="session")
def checkov_venv() -> Path:
    """The isolated checkov environment, built or waited for."""
    return ready("checkov-venv")


def test_checkov_finds_nothing_unexplained(default_assembly: Assembly, checkov_venv: Path) -> None:
    version, findings, passed = run_checkov(default_assembly.out, checkov_venv)
    assert version == "3.3.30", "the pin in policies/verify/checkov/requirements.txt"
    skips = load_skips()
    shown = [f"{f.check} {f.resource} ({f.template}): {f.name}" for f in unexplained(findings, skips)]
    assert shown == [], (
        "new checkov findings: fix them, or list them with a reason in policies/verify/checkov/skips.yaml"
    )
    assert [f"{s.check} {s.resource}" for s in stale(findings, skips)] == [], "skips that match no finding any more"
    assert passed >= 100, f"checkov passed only {passed} checks: did it read the templates?"
    print(f"\ncheckov {version}: {passed} checks passed, {len(findings)} findings, all explained in skips.yaml")


def test_the_notebook_role_is_assumable_by_sagemaker_only(default_assembly: Assembly) -> None:
    """What the CKV2_AWS_68 skip relies on (the check cannot see a role of another template)."""
    roles = default_assembly.resources("identity", "AWS::IAM::Role")
    notebook = next(r for r in roles.values() if r["Properties"]["RoleName"] == "llm-demo-notebook")
    [statement] = notebook["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Service": "sagemaker.amazonaws.com"}
    assert statement["Action"] == "sts:AssumeRole"


def test_a_new_finding_or_a_stale_skip_is_reported() -> None:
    skips = [Skip("CKV_AWS_18", "AWS::S3::Bucket.DatasetBucketAccessLogs", "x" * 40)]
    logs = Finding("CKV_AWS_18", "AWS::S3::Bucket.DatasetBucketAccessLogs3AC0F268", "t.json", "access logging")
    other = Finding("CKV_AWS_18", "AWS::S3::Bucket.DatasetBucketDatasets1234", "t.json", "access logging")
    assert unexplained([logs, other], skips) == [other]
    assert stale([other], skips) == skips and stale([logs], skips) == []


def test_every_skip_has_a_reason(tmp_path: Path) -> None:
    assert len(load_skips()) >= 1
    (tmp_path / "skips.yaml").write_text("- check: CKV_AWS_1\n  resource: AWS::S3::Bucket.X\n  reason: no\n")
    with pytest.raises(ValueError, match=r"skips.yaml\[0\] \(CKV_AWS_1\): give the reason"):
        load_skips(tmp_path / "skips.yaml")
