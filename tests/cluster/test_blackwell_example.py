"""spec/examples/p6-b200-capacity-block.yaml through the two oracles the default deployment alone used to meet: the
runtime contract (ParallelCluster 3.16.1's own builders say what its B200 nodes call; our roles and endpoint
policies allow each call) and the access matrix (every case of the data perimeter, evaluated by the IAM engine over
this deployment's synthesized policies). Its schema, Slurm names and job rendering are checked with the other
examples (tests/cluster/test_pcluster_schema.py, test_slurm_names.py, test_pcluster_slurm.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.verify.runtime_contract import (
    omissions,
    omitted,
)
from policies.verify.extract import extract_from_assembly
from policies.verify.harness.engine import Engine
from policies.verify.matrix import build_cases, matrix_context, policy_set
from policies.verify.matrix import evaluate as evaluate_matrix
from tests.cluster.contract_example import Synthesized, synthesize_with_contract
from tests.stacks.conftest import REPO

pytestmark = [pytest.mark.pcluster, pytest.mark.synth]

EXAMPLE = REPO / "spec" / "examples" / "p6-b200-capacity-block.yaml"


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory: pytest.TempPathFactory, pcluster_venv: Path) -> Synthesized:
    return synthesize_with_contract(EXAMPLE, tmp_path_factory.mktemp("cdk-out-b200"))


def test_the_example_deploys_a_b200_queue_on_a_capacity_block(synthesized: Synthesized) -> None:
    cluster = synthesized.spec.cluster
    assert cluster is not None
    assert [queue.instance_type for queue in cluster.queues] == ["p6-b200.48xlarge"]
    assert cluster.queues[0].capacity.type == "capacity_block"


def test_every_runtime_call_of_the_b200_nodes_is_allowed(synthesized: Synthesized) -> None:
    found = omissions(synthesized.spec, synthesized.deployment.config)
    denied = [v.describe() for v in synthesized.verdicts if not v.allowed and omitted(v.call, found) is None]
    assert denied == []
    assert {v.call.role for v in synthesized.verdicts} >= {"head", "compute"}


def test_the_head_node_may_launch_into_the_capacity_block(synthesized: Synthesized) -> None:
    """ParallelCluster grants its head node RunInstances on the reservation a Capacity Block queue names; our role
    and the EC2 endpoint must let that call through, or the queue never starts a node."""
    reservation = "capacity-reservation/cr-0fedcba9876543210"
    launches = [
        v for v in synthesized.verdicts if v.call.action == "ec2:RunInstances" and v.call.resource.endswith(reservation)
    ]
    assert [(v.call.role, v.allowed) for v in launches] == [("head", True)], [v.describe() for v in launches]


def test_the_access_matrix_holds_for_the_example(synthesized: Synthesized) -> None:
    extracted = extract_from_assembly(synthesized.out, synthesized.spec)
    context = matrix_context(synthesized.spec, extracted)
    results = evaluate_matrix(build_cases(synthesized.spec, context), policy_set(extracted, synthesized.spec),
                              context, Engine())  # fmt: skip
    failures = [f"{r.case.case_id}: {'; '.join(r.mismatches())}" for r in results if not r.as_expected]
    assert len(results) >= 40 and failures == []
