"""The reviewer's report: the matrix as markdown, with the reason for every denial and the mutation score."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from policies.principals import principal
from policies.verify.extract import from_builders
from policies.verify.harness.engine import Engine
from policies.verify.matrix import CaseResult, build_cases, matrix_context
from policies.verify.mutations import MutationReport
from policies.verify.report import GROUP_TITLES, main, render
from spec import load_spec
from tests.policies.conftest import PolicyWorld
from tests.stacks.conftest import Assembly


def _row(text: str, case_id: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(f"| `{case_id}` |"))


def test_report_lists_every_case_with_who_what_and_why(
    world: PolicyWorld, matrix: list[CaseResult], mutation_report: MutationReport
) -> None:
    text = render(world.spec, world.extracted, matrix, mutation_report, "0.1.173")
    assert text.startswith("# Access matrix: llm-demo\n")
    assert f"**{len(matrix)} cases**" in text and "all as expected." in text
    assert "Template vs builders: no drift." in text
    assert "mutation score 100.0 %" in text
    assert sum(line.startswith("| `") and "` | " in line for line in text.splitlines()) >= len(matrix)

    no_tls = _row(text, "no-tls")
    assert "through access point `llm-demo-pretraining` (no TLS)" in no_tls
    assert "**bucket** (explicit Deny): DenyRequestsWithoutTls: explicit Deny (Bool aws:SecureTransport)" in no_tls
    read = _row(text, "read/pretraining/cluster-node")
    assert "| Allowed |" in read and "access-point (ReadersGetUnderDatasetPrefix)" in read
    outsider = _row(text, "outside-organization-credentials")
    assert "Denied (5 layers)" in outsider and "DenyPrincipalsOutsideOrganization" in outsider
    direct = _row(text, "read-bucket-directly/pretraining/cluster-node")
    assert "s3:DataAccessPointArn" in direct and "fails (request: key absent)" in direct


def test_report_flags_a_case_that_does_not_hold(world: PolicyWorld, matrix: list[CaseResult]) -> None:
    broken = [replace(matrix[0], case=replace(matrix[0].case, denials={"identity": frozenset()})), *matrix[1:]]
    text = render(world.spec, world.extracted, broken, None, None)
    assert "**1 not as expected.**" in text
    assert "**NOT AS EXPECTED**" in _row(text, matrix[0].case.case_id)
    assert "Mutation testing" not in text


def test_report_command_writes_the_file(default_assembly: Assembly, tmp_path: Path) -> None:
    output = tmp_path / "docs" / "access-matrix.md"
    assert main(["--cdk-out", str(default_assembly.out), "--output", str(output), "--no-mutations"]) == 0
    assert output.read_text().startswith("# Access matrix: llm-demo")


def test_report_command_without_a_synth_says_what_to_do(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--cdk-out", str(tmp_path / "missing"), "--no-mutations"]) == 2
    assert "run `make synth` first" in capsys.readouterr().err


def test_the_committed_access_matrix_is_the_current_report(
    world: PolicyWorld, matrix: list[CaseResult], mutation_report: MutationReport, engine: Engine
) -> None:
    """docs/access-matrix.md is what `make policy-report` writes for today's code: a new case, layer or mutant
    without a regenerated page fails here, not in a reader's hands."""
    committed = (Path(__file__).resolve().parents[3] / "docs" / "access-matrix.md").read_text()
    fresh = render(world.spec, world.extracted, matrix, mutation_report, engine.version)
    assert committed == fresh, "docs/access-matrix.md is stale: run `make policy-report`"


def test_every_case_family_has_a_section_in_the_report() -> None:
    # A family without one would be evaluated but never shown; a principal's own family brings its section.
    spec = load_spec()
    cases = build_cases(spec, matrix_context(spec, from_builders(spec)))
    assert {case.group for case in cases} <= set(GROUP_TITLES)
    assert GROUP_TITLES["operators"] == principal("operator").case_group_title
