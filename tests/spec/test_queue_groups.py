"""Datasets per group (issue 43): a queue's `allowed_groups` admits only those groups to its partition, and its own
node role `queue-<queue>` reads the datasets that name it; every mistake is one line naming the field and value."""

from __future__ import annotations

from typing import Any

import pytest

from spec import DeploymentSpec, SpecError, parse_spec
from tests.cluster.conftest import with_cluster

GROUPS: list[dict[str, Any]] = [{"name": "pretraining", "gid": 2001}, {"name": "research", "gid": 2002}]
USERS: list[dict[str, Any]] = [
    {"name": "alice", "uid": 2101, "group": "pretraining"},
    {"name": "bob", "uid": 2102, "group": "research"},
]
QUEUE = {"instance_type": "p5.48xlarge", "max_count": 2, "placement_group": True}


def split_spec(
    pretraining_readers: list[str] | None = None, queues: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Two groups, a partition each; the pretraining dataset read only by the pretraining group's queue role, and
    the finetuning dataset only by the research group's."""

    def edit(cluster: dict[str, Any]) -> None:
        cluster.update(users=USERS, groups=GROUPS)
        cluster["queues"] = queues or [
            {"name": "pretrain", "allowed_groups": ["pretraining"], **QUEUE},
            {"name": "research", "allowed_groups": ["research"], **QUEUE},
        ]

    data = with_cluster(edit)
    datasets = {d["name"]: d for d in data["data"]["datasets"]}
    datasets["pretraining"]["readers"] = pretraining_readers or ["queue-pretrain", "head-node"]
    datasets["finetuning"]["readers"] = ["queue-research"]
    return data


def problems(data: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as caught:
        parse_spec(data)
    return str(caught.value).splitlines()


def test_queues_are_open_to_everyone_by_default_and_a_split_parses() -> None:
    spec: DeploymentSpec = parse_spec(split_spec())
    assert spec.cluster is not None
    assert [queue.allowed_groups for queue in spec.cluster.queues] == [["pretraining"], ["research"]]
    assert [d.name for d in spec.datasets_readable_by("queue-pretrain")] == ["pretraining"]
    assert [d.name for d in spec.datasets_readable_by("queue-research")] == ["finetuning"]
    assert spec.role_arn("queue-pretrain") == "arn:aws:iam::111111111111:role/llm-demo-queue-pretrain"
    assert spec.queue_roles == ["queue-pretrain", "queue-research"]
    open_queue = parse_spec(with_cluster(lambda cluster: None)).cluster
    assert open_queue is not None and open_queue.queues[0].allowed_groups == []


def test_a_queue_role_must_name_a_queue_with_allowed_groups() -> None:
    assert (
        "spec: data.datasets[0].readers[0]: 'queue-gpu' names no queue of cluster.queues (queues: pretrain, research)"
        in problems(split_spec(["queue-gpu"]))
    )
    open_research = [
        {"name": "pretrain", "allowed_groups": ["pretraining"], **QUEUE},
        {"name": "research", **QUEUE},
    ]
    assert (
        "spec: data.datasets[1].readers[0]: 'queue-research' is the role of queue research, which is open to every "
        "user: give the queue allowed_groups, or name cluster-node"
    ) in problems(split_spec(queues=open_research))


def test_allowed_groups_are_declared_groups_each_listed_once() -> None:
    queues = [
        {"name": "pretrain", "allowed_groups": ["pretraining", "ops"], **QUEUE},
        {"name": "research", "allowed_groups": ["research", "research"], **QUEUE},
    ]
    found = problems(split_spec(queues=queues))
    assert (
        "spec: cluster.queues[0].allowed_groups[1]: 'ops' is not a declared group (declared: pretraining, research)"
        in found
    )
    assert "spec: cluster.queues[1].allowed_groups[1]: 'research' is listed twice" in found
