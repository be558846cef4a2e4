"""Restricting a running cluster's queue to some groups (issue 43) is a live update by ParallelCluster's own policies:
the queue's instance role and its partition's AllowGroups (cluster/update_policy.py)."""

from __future__ import annotations

import copy
from typing import Any

from cluster.update_plan import plan_update
from cluster.update_policy import Action
from spec import parse_spec
from tests.cluster.conftest import spec_dict
from tests.spec.test_queue_groups import GROUPS, USERS

PAYLOAD = "HeadNode.CustomActions.OnNodeUpdated.Sequence"


def restricted(groups: list[str]) -> Any:
    data: dict[str, Any] = copy.deepcopy(spec_dict())
    data["cluster"].update(users=USERS, groups=GROUPS)
    data["cluster"]["queues"][0]["allowed_groups"] = groups
    return parse_spec(data)


def changes(old: Any, new: Any) -> dict[str, Action]:
    found = {item.change.path: item.action for item in plan_update(old, new).changes}
    found.pop(PAYLOAD, None)
    return found


def test_giving_a_queue_allowed_groups_and_changing_them_are_live() -> None:
    open_queue = parse_spec({**copy.deepcopy(spec_dict()), "cluster": {**spec_dict()["cluster"], "users": USERS,
                                                                        "groups": GROUPS}})  # fmt: skip
    assert changes(open_queue, restricted(["pretraining"])) == {
        "Scheduling.SlurmQueues[gpu].Iam.InstanceRole": Action.LIVE,
        "Scheduling.SlurmQueues[gpu].CustomSlurmSettings": Action.LIVE,
    }
    assert changes(restricted(["pretraining"]), restricted(["pretraining", "research"])) == {
        "Scheduling.SlurmQueues[gpu].CustomSlurmSettings.AllowGroups": Action.LIVE,
    }
