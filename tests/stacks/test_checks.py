"""cdk-nag (AwsSolutions) passes with reasoned acknowledgments only; cfn-lint finds no errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.stacks.conftest import Assembly


def test_cdk_nag_passes_with_reasoned_acknowledgments_only(default_assembly: Assembly) -> None:
    reports = {r["pluginName"]: r for r in default_assembly.validation_report["pluginReports"]}
    nag = reports["AwsSolutions"]
    assert nag["conclusion"] == "success"
    assert nag["violations"] == []
    for suppressed in nag["suppressedViolations"]:
        assert len(suppressed["reason"]) >= 40, suppressed
        # Acknowledged where the finding is, not across a whole stack.
        assert suppressed["acknowledgedAt"].count("/") >= 1, suppressed


def test_cfn_lint_reports_no_errors(default_assembly: Assembly) -> None:
    templates = sorted(str(p) for p in default_assembly.out.glob("*.template.json"))
    assert len(templates) == len(default_assembly.spec.stack_names)
    # Errors (E) fail; warnings are printed for the reader but do not fail the check.
    result = subprocess.run(
        [str(Path(sys.executable).with_name("cfn-lint")), "--format", "parseable", "--", *templates],
        capture_output=True,
        text=True,
    )
    errors = [line for line in result.stdout.splitlines() if ":E" in line]
    assert not errors, "\n".join(errors)
    assert result.returncode in (0, 4, 8, 12), result.stderr  # 2 = errors; 4 warnings; 8 informational
