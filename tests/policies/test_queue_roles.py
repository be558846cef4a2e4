"""The node role of a queue with allowed_groups (issue 43): its own principal, reaching only the datasets that name
it; ParallelCluster may pass it to EC2 and its nodes get the compute nodes' cluster permissions."""

from __future__ import annotations

import pytest

from cluster.config_builder import build_cluster_config, example_refs
from policies.access_point import access_point_policy
from policies.artifacts import artifacts_read_policy
from policies.cluster_nodes import head_node_cluster_policy
from policies.identity import identity_policy
from policies.principals import created_principals
from spec import DeploymentSpec, parse_spec
from stacks.parts.parallel_cluster import provider_node_roles_policy
from tests.spec.test_queue_groups import split_spec


@pytest.fixture(scope="module")
def spec() -> DeploymentSpec:
    return parse_spec(split_spec())


def _resources(document: object) -> str:
    return str(document)


def test_each_queue_role_reaches_only_the_access_points_naming_it(spec: DeploymentSpec) -> None:
    pretraining, finetuning = (spec.access_point_arn(d) for d in spec.data.datasets[:2])
    pretrain_policy = _resources(identity_policy(spec, "queue-pretrain"))
    assert pretraining in pretrain_policy and finetuning not in pretrain_policy
    research_policy = _resources(identity_policy(spec, "queue-research"))
    assert finetuning in research_policy and pretraining not in research_policy
    granted = _resources(access_point_policy(spec, spec.data.datasets[0]))
    assert spec.role_arn("queue-pretrain") in granted and spec.role_arn("queue-research") not in granted


def test_queue_roles_are_registered_principals_with_the_compute_nodes_artifacts(spec: DeploymentSpec) -> None:
    entries = {entry.key: entry for entry in created_principals(spec)}
    assert {"queue-pretrain", "queue-research"} <= set(entries)
    documents = entries["queue-pretrain"].exact_documents(spec)
    assert documents["datasets"] == identity_policy(spec, "queue-pretrain")
    assert artifacts_read_policy(spec, "queue-pretrain") == artifacts_read_policy(spec, "cluster-node")
    assert entries["queue-pretrain"].role_name(spec) == "llm-demo-queue-pretrain"


def test_parallelcluster_may_pass_each_queue_role_to_ec2(spec: DeploymentSpec) -> None:
    for document in (provider_node_roles_policy(spec), head_node_cluster_policy(spec, [])):
        passed = _resources(document)
        assert spec.role_arn("queue-pretrain") in passed and spec.role_arn("queue-research") in passed


def test_a_restricted_queue_runs_as_its_own_role_and_admits_only_its_groups(spec: DeploymentSpec) -> None:
    queues = build_cluster_config(spec, example_refs(spec))["Scheduling"]["SlurmQueues"]
    assert [queue["Iam"]["InstanceRole"] for queue in queues] == [
        "arn:aws:iam::111111111111:role/llm-demo-queue-pretrain",
        "arn:aws:iam::111111111111:role/llm-demo-queue-research",
    ]
    assert [queue["CustomSlurmSettings"] for queue in queues] == [
        {"AllowGroups": "pretraining"},
        {"AllowGroups": "research"},
    ]
