"""Datasets per group, proven on the synthesized templates (issue 43): with two groups on two partitions, each
queue's role is a registered principal with only its declared policies, and the access matrix holds: the pretraining
group's partition reads the pretraining dataset and is denied the research group's, and the other way round."""

from __future__ import annotations

from pathlib import Path

from tests.policies.verify.synthesized import evaluated_cases
from tests.spec.test_queue_groups import split_spec


def test_each_partitions_role_reads_its_groups_dataset_and_is_denied_the_others(tmp_path: Path) -> None:
    results = evaluated_cases(
        split_spec(), tmp_path, lambda case, spec: case.case_id.split("/")[-1] in spec.queue_roles
    )
    verdicts = {r.case.case_id: r.case.expect_allowed for r in results}
    assert verdicts["read/pretraining/queue-pretrain"] is True
    assert verdicts["read/finetuning/queue-research"] is True
    assert verdicts["read-other-dataset/finetuning/queue-pretrain"] is False
    assert verdicts["read-other-dataset/pretraining/queue-research"] is False
    assert verdicts["read-other-dataset/checkpoints/queue-pretrain"] is False
