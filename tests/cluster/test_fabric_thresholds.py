"""The busbw floor per instance type (80 % of the published nccl-tests baseline, else F x the node's EFA
bandwidth) and the bytes an all-reduce must move."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cluster.fabric.thresholds import FabricError, busbw_threshold, min_cross_node_bytes
from spec.platform.instances import ACCELERATED_TYPES, instance_facts

DOC = Path(__file__).resolve().parents[2] / "docs" / "fabric-checks.md"


def test_p5_floor_is_80_percent_of_the_published_16_gib_busbw() -> None:
    # 2 x p5.48xlarge reach about 487 GB/s at 16 GiB (NVLS/tree), above the 400 GB/s a ring's line rate allows:
    # a line-rate floor (280 GB/s) would pass a pair that lost 40 % of its bandwidth.
    threshold = busbw_threshold(instance_facts("p5.48xlarge"), nodes=2)
    assert threshold.baseline is not None and threshold.baseline.busbw_gb_per_s == 487.0
    assert threshold.min_busbw_gb_per_s == pytest.approx(389.6)
    assert threshold.describe() == "2 x p5.48xlarge (80 % of the published 487 GB/s)"


@pytest.mark.parametrize(
    ("instance", "expected"),
    [
        ("p4d.24xlarge", 62.4),
        ("p4de.24xlarge", 62.4),
        ("p5en.48xlarge", 280.0),
        ("trn1.32xlarge", 40.0),
        ("trn1n.32xlarge", 80.0),
        ("p6-b200.48xlarge", 280.0),  # 70 % of 8 x 400 Gbps
        ("p6-b300.48xlarge", 560.0),  # 70 % of 16 x 400 Gbps
        ("trn2.48xlarge", 160.0),  # 40 % of 16 x 200 Gbps
    ],
)
def test_floors_follow_the_baseline_or_line_rate_and_the_accelerators_fraction(instance: str, expected: float) -> None:
    assert busbw_threshold(instance_facts(instance), nodes=4).min_busbw_gb_per_s == pytest.approx(expected)


@pytest.mark.parametrize("instance", ACCELERATED_TYPES)
def test_the_floor_does_not_depend_on_the_node_count(instance: str) -> None:
    facts = instance_facts(instance)
    floors = {busbw_threshold(facts, nodes).min_busbw_gb_per_s for nodes in (2, 3, 16)}
    assert len(floors) == 1
    floor = floors.pop()
    threshold = busbw_threshold(facts, 2)
    if threshold.baseline is None:
        # Ring all-reduce: busbw's 2(N-1)/N cancels the per-node traffic's, so the ceiling is line rate for any N.
        assert floor <= facts.network_gbps / 8
    else:
        assert floor < threshold.baseline.busbw_gb_per_s


def test_an_explicit_fraction_overrides_the_default() -> None:
    threshold = busbw_threshold(instance_facts("p5.48xlarge"), 2, fraction=0.85)
    assert threshold.min_busbw_gb_per_s == pytest.approx(340.0)  # a share of the line rate
    assert threshold.describe() == "2 x p5.48xlarge (85 % of 3200 Gbps)"


@pytest.mark.parametrize(
    ("instance", "nodes", "fraction", "message"),
    [
        ("trn1.32xlarge", 1, None, "--nodes: 1 must be at least 2 (the check measures traffic between nodes over EFA)"),
        ("p5.48xlarge", 0, None, "--nodes: 0 must be at least 2 (the check measures traffic between nodes over EFA)"),
        ("p5.48xlarge", 2, 1.5, "--min-fraction: 1.5 must be above 0 and at most 1"),
        ("p5.48xlarge", 2, 0.0, "--min-fraction: 0.0 must be above 0 and at most 1"),
        (
            "m6i.2xlarge",
            2,
            None,
            "--instance-type: m6i.2xlarge has no accelerators; the fabric check needs GPU or trn1",
        ),
    ],
)
def test_bad_input_is_one_line_naming_the_argument(
    instance: str, nodes: int, fraction: float | None, message: str
) -> None:
    with pytest.raises(FabricError) as error:
        busbw_threshold(instance_facts(instance), nodes, fraction)
    assert str(error.value) == message


def test_bytes_each_node_must_exchange() -> None:
    sizes = [1 << power for power in range(3, 35)]  # all_reduce_perf -b 8 -e 16G -f 2
    # 20 timed iterations, out-of-place and in-place: half of each buffer leaves each of 2 nodes.
    assert min_cross_node_bytes(sizes, nodes=2, operations_per_size=40) == 20 * ((1 << 35) - 8)
    assert min_cross_node_bytes([1 << 30], nodes=4, operations_per_size=1) == 3 * (1 << 28)


def test_the_docs_table_matches_the_rule() -> None:
    rows = re.findall(r"^\| `([a-z0-9.-]+)` \| (\d+) \| (\d+) \| ([\d.]+) \| ([\d.]+) \|$", DOC.read_text(), re.M)
    assert {row[0] for row in rows} == set(ACCELERATED_TYPES)
    for instance, gbps, efa, fraction, floor in rows:
        facts = instance_facts(instance)
        threshold = busbw_threshold(facts, 2)
        assert (int(gbps), int(efa)) == (facts.network_gbps, facts.efa_interfaces), instance
        assert float(fraction) == threshold.fraction and float(floor) == round(threshold.min_busbw_gb_per_s, 1)


@pytest.mark.parametrize(
    ("instance", "floor"),
    [
        ("p4d.24xlarge", 180.0),
        ("p5.48xlarge", 270.0),
        ("p5en.48xlarge", 270.0),
        ("p6-b200.48xlarge", 540.0),  # NVLink 5: 900 GB/s per GPU each way
        ("p6-b300.48xlarge", 540.0),
    ],
)
def test_one_gpu_node_is_held_to_its_nvlink_bandwidth(instance: str, floor: float) -> None:
    threshold = busbw_threshold(instance_facts(instance), nodes=1)
    assert threshold.intra_node and threshold.min_busbw_gb_per_s == pytest.approx(floor)
    assert min_cross_node_bytes([1 << 30], nodes=1, operations_per_size=20) == 0
    if instance == "p5.48xlarge":
        assert threshold.describe() == "1 x p5.48xlarge over NVLink (60 % of 450 GB/s per GPU)"
