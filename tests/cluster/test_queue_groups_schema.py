"""A queue with allowed_groups (issue 43) as ParallelCluster's own schema and validators read it: its own instance
role and the partition's AllowGroups in the queue's CustomSlurmSettings."""

from __future__ import annotations

from pathlib import Path

from cluster.config_builder import build_cluster_config, example_refs
from cluster.verify.pcluster.runner import schema_errors
from spec import parse_spec
from tests.spec.test_queue_groups import split_spec


def test_a_split_cluster_passes_parallelclusters_schema_and_validators(pcluster_venv: Path) -> None:
    spec = parse_spec(split_spec())
    config = build_cluster_config(spec, example_refs(spec))
    assert [queue.get("CustomSlurmSettings") for queue in config["Scheduling"]["SlurmQueues"]] == [
        {"AllowGroups": "pretraining"},
        {"AllowGroups": "research"},
    ]
    assert schema_errors({"split": config}) == {"split": None}
