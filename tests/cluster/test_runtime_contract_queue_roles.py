"""The runtime contract on a split deployment (issue 43): each queue with allowed_groups runs its nodes as its own role
`<name>-queue-<queue>`, so ParallelCluster's compute-node calls from that queue are judged against that role's
policies (and the endpoints'), not the shared cluster-node role's. The deployment is tests/spec/test_queue_groups'
split spec (partitions pretrain and research), synthesized in process with cdk-nag."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from cluster.verify.pcluster.runner import node_policies
from cluster.verify.runtime_contract import (
    Deployment,
    Verdict,
    bootstrap_calls,
    calls,
    evaluate,
    granted_from,
    node_policies_request,
    omissions,
    omitted,
    read_deployment,
)
from policies.verify.harness.engine import Engine
from spec import DeploymentSpec, parse_spec
from tests.spec.test_queue_groups import split_spec

pytestmark = [pytest.mark.pcluster, pytest.mark.synth]

QUEUES = ("pretrain", "research")


@dataclass
class Split:
    spec: DeploymentSpec
    deployment: Deployment
    verdicts: list[Verdict]


@pytest.fixture(scope="module")
def split(tmp_path_factory: pytest.TempPathFactory, pcluster_venv: Path) -> Split:
    from tests.stacks.test_variants import synth

    doc = split_spec()
    out = tmp_path_factory.mktemp("cdk-out-split")
    synth(doc, out)
    spec = parse_spec(doc)
    deployment = read_deployment(out, spec)
    granted = granted_from(node_policies(node_policies_request(spec, deployment.config)))
    assert set(granted.roles) == {"head", *(f"compute:{queue}" for queue in QUEUES)}
    verdicts = evaluate(calls(spec, granted), spec, deployment.identity, deployment.endpoints, Engine())
    return Split(spec, deployment, verdicts)


def test_each_queue_role_is_read_from_the_templates(split: Split) -> None:
    assert set(split.deployment.identity) == {"head", "compute", *(f"queue-{queue}" for queue in QUEUES)}
    for queue in QUEUES:
        names = {name for name, _ in split.deployment.identity[f"queue-{queue}"]}
        assert names, queue  # the queue role's own policies, as synthesized


def test_each_queues_calls_are_judged_as_its_own_role_and_all_pass(split: Split) -> None:
    by_queue = {queue: [v for v in split.verdicts if v.call.queue == queue] for queue in QUEUES}
    for queue, verdicts in by_queue.items():
        assert verdicts, queue
        assert {v.principal for v in verdicts} == {split.spec.role_arn(f"queue-{queue}")}, queue
    heads = {v.principal for v in split.verdicts if v.call.role == "head"}
    assert heads == {split.spec.role_arn("head-node")}
    found = omissions(split.spec, split.deployment.config)
    denied = [v.describe() for v in split.verdicts if not v.allowed and omitted(v.call, found) is None]
    assert denied == [], "ParallelCluster's nodes would be refused:\n" + "\n".join(denied)


def test_a_grant_missing_from_one_queue_role_fails_that_queue_alone(split: Split) -> None:
    """Without the Slurm table lookup in queue-pretrain's policies, the pretrain nodes could not find their Slurm
    names: the contract says so for that queue, and the research queue (its own role) still passes."""
    weakened = dict(split.deployment.identity)
    weakened["queue-pretrain"] = [
        (name, {**doc, "Statement": [s for s in doc["Statement"] if s.get("Sid") != "FindSlurmNodeName"]})
        for name, doc in split.deployment.identity["queue-pretrain"]
    ]
    verdicts = evaluate([v.call for v in split.verdicts], split.spec, weakened, split.deployment.endpoints, Engine())
    denied = {(v.call.queue, v.call.action) for v in verdicts if not v.allowed}
    assert ("pretrain", "dynamodb:Query") in denied
    assert ("research", "dynamodb:Query") not in denied


def test_each_queues_bootstrap_fetch_passes_as_its_own_role(split: Split) -> None:
    """Our own bootstrap: each queue's nodes fetch their CustomActions script, as the queue's role."""
    found = bootstrap_calls(split.spec, split.deployment.config)
    assert {call.queue for call in found if call.role == "compute"} == set(QUEUES)
    verdicts = evaluate(found, split.spec, split.deployment.identity, split.deployment.endpoints, Engine())
    assert [v.describe() for v in verdicts if not v.allowed] == []
    judged = {(v.call.queue, v.principal) for v in verdicts if v.call.role == "compute"}
    assert judged == {(queue, split.spec.role_arn(f"queue-{queue}")) for queue in QUEUES}
