"""Datasets per group, proven on the synthesized templates (issue 43): with two groups on two partitions, each
queue's role is a registered principal with only its declared policies, and the access matrix holds: the pretraining
group's partition reads the pretraining dataset and is denied the research group's, and the other way round."""

from __future__ import annotations

from pathlib import Path

from policies.verify.extract import extract_policies, stack_environments
from policies.verify.harness.engine import Engine
from policies.verify.matrix import build_cases, evaluate, matrix_context, policy_set
from policies.verify.principal_coverage import (
    principals_without_cases,
    roles_the_registry_does_not_match,
    undeclared_policies,
)
from spec import parse_spec
from tests.spec.test_queue_groups import split_spec


def test_each_partitions_role_reads_its_groups_dataset_and_is_denied_the_others(tmp_path: Path) -> None:
    from tests.stacks.test_variants import synth

    doc = split_spec()
    templates, _ = synth(doc, tmp_path)
    spec, environments = parse_spec(doc), stack_environments(tmp_path)
    assert roles_the_registry_does_not_match(templates, spec, environments) == []
    extracted = extract_policies(templates, spec, environments)
    assert undeclared_policies(extracted, spec) == []
    context = matrix_context(spec, extracted)
    cases = build_cases(spec, context)
    assert principals_without_cases(cases, spec) == []
    queue_cases = [case for case in cases if case.case_id.split("/")[-1] in spec.queue_roles]
    results = evaluate(queue_cases, policy_set(extracted, spec), context, Engine())
    assert [f"{r.case.case_id}: {'; '.join(r.mismatches())}" for r in results if not r.as_expected] == []
    verdicts = {r.case.case_id: r.case.expect_allowed for r in results}
    assert verdicts["read/pretraining/queue-pretrain"] is True
    assert verdicts["read/finetuning/queue-research"] is True
    assert verdicts["read-other-dataset/finetuning/queue-pretrain"] is False
    assert verdicts["read-other-dataset/pretraining/queue-research"] is False
    assert verdicts["read-other-dataset/checkpoints/queue-pretrain"] is False
