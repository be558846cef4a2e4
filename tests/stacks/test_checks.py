"""cdk-nag (AwsSolutions) passes with reasoned acknowledgments only; cfn-lint finds no errors."""

from __future__ import annotations

from tests.stacks.conftest import Assembly, cfn_lint_errors


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
    errors = cfn_lint_errors(templates)
    assert not errors, "\n".join(errors)
