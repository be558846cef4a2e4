import pytest

from planner.calibration import CALIBRATED, LOCAL_LINK_EFFICIENCY
from planner.comms import Group, collective, point_to_point
from planner.hardware import hardware

P5 = hardware("p5.48xlarge")
GB = 1e9


def test_a_single_rank_moves_nothing() -> None:
    assert collective("all_gather", GB, Group(1, 1), P5, CALIBRATED).seconds == 0.0


def test_inside_one_node_only_the_local_links_carry_bytes() -> None:
    moved = collective("all_gather", 8 * GB, Group(8, 8), P5, CALIBRATED)
    assert moved.network_bytes_per_node == 0.0
    assert moved.local_bytes_per_device == pytest.approx(7 * GB)
    assert moved.seconds == pytest.approx(7 * GB / (450e9 * LOCAL_LINK_EFFICIENCY), rel=0.01)


def test_across_nodes_each_node_receives_what_the_others_hold() -> None:
    gather = collective("all_gather", 10 * GB, Group(32, 8), P5, CALIBRATED)  # 4 nodes
    assert gather.network_bytes_per_node == pytest.approx(10 * GB * 3 / 4)
    reduce = collective("all_reduce", 10 * GB, Group(32, 8), P5, CALIBRATED)
    assert reduce.network_bytes_per_node == pytest.approx(2 * gather.network_bytes_per_node)
    assert reduce.seconds == pytest.approx(2 * gather.seconds)


def test_groups_sharing_a_node_share_its_network() -> None:
    # TP 8 fills a node: eight DP groups (one per TP rank) each reduce their slice through the same EFA.
    one = collective("all_reduce", GB, Group(4, 1, 1), P5, CALIBRATED)
    eight = collective("all_reduce", GB, Group(4, 1, 8), P5, CALIBRATED)
    assert eight.network_bytes_per_node == pytest.approx(8 * one.network_bytes_per_node)
    assert eight.seconds > 7 * one.seconds


def test_a_faster_network_is_never_slower() -> None:
    slow = hardware("p5.48xlarge", network_gbps=400)
    group = Group(64, 8)
    assert (
        collective("reduce_scatter", GB, group, P5, CALIBRATED).seconds
        < collective("reduce_scatter", GB, group, slow, CALIBRATED).seconds
    )


def test_point_to_point_inside_or_across_nodes() -> None:
    across = point_to_point(GB, P5, CALIBRATED, across_nodes=True, senders_per_node=8)
    inside = point_to_point(GB, P5, CALIBRATED, across_nodes=False, senders_per_node=8)
    assert across.network_bytes_per_node == 8 * GB and inside.network_bytes_per_node == 0.0
    assert inside.seconds < across.seconds


def test_nccl_all_reduces_small_tensors_over_many_nodes_as_a_tree() -> None:
    # A ring pays 2 (n - 1) network hops; NCCL's double binary tree pays 2 log2(n), and NCCL picks the faster.
    from planner.calibration import NETWORK_HOP_LATENCY_S

    small = collective("all_reduce", 1e3, Group(64 * 8, 8), P5, CALIBRATED)
    assert small.algorithm == "tree"
    assert small.seconds < 2 * 63 * NETWORK_HOP_LATENCY_S
    large = collective("all_reduce", 10 * GB, Group(16 * 8, 8), P5, CALIBRATED)
    assert large.algorithm == "ring"


def test_gathers_and_reduce_scatters_run_as_rings_whatever_the_size() -> None:
    from planner.calibration import NETWORK_HOP_LATENCY_S

    gather = collective("all_gather", 1e3, Group(64 * 8, 8), P5, CALIBRATED)
    assert gather.algorithm == "ring" and gather.seconds >= 63 * NETWORK_HOP_LATENCY_S


def test_every_bucket_pays_the_collective_latency_again() -> None:
    from planner.calibration import LOCAL_HOP_LATENCY_S, NETWORK_HOP_LATENCY_S

    one = collective("all_reduce", GB, Group(16, 8), P5, CALIBRATED)
    forty = collective("all_reduce", GB, Group(16, 8), P5, CALIBRATED, buckets=40)
    ring_latency = 2 * 1 * NETWORK_HOP_LATENCY_S + 2 * 7 * LOCAL_HOP_LATENCY_S  # 2 nodes x 8 ranks, two passes
    assert forty.seconds - one.seconds == pytest.approx(39 * ring_latency, rel=0.05)
    assert forty.network_bytes_per_node == pytest.approx(one.network_bytes_per_node)
