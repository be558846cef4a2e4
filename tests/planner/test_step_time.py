import dataclasses

import pytest

from planner.calibration import CALIBRATED
from planner.hardware import hardware
from planner.job import Job, Software
from planner.step_time import estimate_step
from training.models.registry import get_model_args

LLAMA_8B = get_model_args("llama3-8b")


def job(**changes) -> Job:
    base = {"model": LLAMA_8B, "hardware": hardware("p5.48xlarge"), "nodes": 4, "seq_len": 8192, "micro_batch": 1}
    return Job(**{**base, **changes})


def test_throughput_and_utilization_follow_from_the_step_time() -> None:
    step = estimate_step(job())
    assert step.tokens_per_s_per_device == pytest.approx(32 * 8192 / step.step_s / 32)
    assert step.mfu == pytest.approx(step.tokens_per_s_per_device * step.model_flops_per_token / 989e12)
    assert 0.2 < step.mfu < 0.6


def test_recompute_costs_time_and_raises_hfu_over_mfu() -> None:
    none, full = estimate_step(job()), estimate_step(job(checkpointing="full"))
    assert full.step_s > none.step_s
    assert full.hfu / full.mfu == pytest.approx(full.hardware_flops_per_token / full.model_flops_per_token)
    assert none.hfu == pytest.approx(none.mfu)


def test_more_network_bandwidth_is_never_slower_and_overlap_helps() -> None:
    slow = estimate_step(job(hardware=hardware("p5.48xlarge", network_gbps=100)))
    fast = estimate_step(job())
    assert fast.step_s <= slow.step_s
    assert slow.data_parallel.network_bytes_per_node == pytest.approx(fast.data_parallel.network_bytes_per_node)
    hidden = estimate_step(job(hardware=hardware("p5.48xlarge", network_gbps=100)))
    exposed = estimate_step(
        job(hardware=hardware("p5.48xlarge", network_gbps=100), software=Software(dp_overlap=False))
    )
    assert exposed.step_s > hidden.step_s


def test_fsdp_moves_two_gathers_and_one_reduce_of_the_model_per_micro_batch() -> None:
    step = estimate_step(job(software=Software(grad_reduce_bytes=2)))
    from training.models.params import count_parameters

    params = count_parameters(LLAMA_8B).total
    assert step.data_parallel.network_bytes_per_node == pytest.approx(3 * 2 * params * 3 / 4)


def test_the_pipeline_bubble_shrinks_with_more_micro_batches() -> None:
    megatron = get_model_args("llama2-70b")
    small = estimate_step(job(model=megatron, tensor_parallel=8, pipeline_parallel=4, global_batch=4))
    large = estimate_step(job(model=megatron, tensor_parallel=8, pipeline_parallel=4, global_batch=64))
    assert small.pipeline_bubble_s / small.step_s > large.pipeline_bubble_s / large.step_s


def test_a_higher_matmul_fraction_is_faster() -> None:
    better = dataclasses.replace(CALIBRATED, matmul_fraction={**CALIBRATED.matmul_fraction, "fsdp.H100": 0.7})
    assert estimate_step(job(), better).step_s < estimate_step(job()).step_s


def test_h200_is_not_slower_than_h100() -> None:
    assert estimate_step(job(hardware=hardware("p5e.48xlarge"))).step_s <= estimate_step(job()).step_s


def test_p5_is_well_ahead_of_p4de_on_the_same_job() -> None:
    a100 = estimate_step(job(hardware=hardware("p4de.24xlarge"), checkpointing="full"))
    h100 = estimate_step(job(checkpointing="full"))
    assert h100.tokens_per_s > 1.5 * a100.tokens_per_s


HSDP_BF16 = Software(sharding="hsdp", grad_reduce_bytes=2)


def test_hsdp_all_reduces_across_nodes_once_per_step_and_gathers_on_nvlink() -> None:
    from training.models.params import count_parameters

    params = count_parameters(LLAMA_8B).total
    one = estimate_step(job(software=HSDP_BF16, global_batch=32))
    four = estimate_step(job(software=HSDP_BF16, global_batch=128))
    # 4 replicas (nodes): each node's 8 shards are all-reduced through its network once per step.
    assert one.data_parallel.network_bytes_per_node == pytest.approx(2 * 2 * params * 3 / 4)
    assert four.data_parallel.network_bytes_per_node == pytest.approx(one.data_parallel.network_bytes_per_node)
    # Gathers and reduce-scatters stay inside the node: every micro-batch, on NVLink.
    assert four.data_parallel.local_bytes_per_device > 3.5 * one.data_parallel.local_bytes_per_device
    fsdp = estimate_step(job(software=Software(grad_reduce_bytes=2), global_batch=128))
    assert fsdp.data_parallel.network_bytes_per_node == pytest.approx(4 * 3 * 2 * params * 3 / 4)


def test_hsdp_hides_its_all_reduce_behind_backward_except_the_last_block() -> None:
    fast = estimate_step(job(software=HSDP_BF16))
    across = fast.data_parallel_breakdown["replica_all_reduce"]
    assert across > 0
    assert fast.data_parallel_exposed_s >= across / LLAMA_8B.n_layers
    assert fast.data_parallel_exposed_s < 0.5 * across  # p5's 3200 Gbps: nearly all of it hides
    slow = estimate_step(job(software=HSDP_BF16, hardware=hardware("p5.48xlarge", network_gbps=100)))
    backward = slow.compute_s * 2 / 3
    assert slow.data_parallel_exposed_s >= slow.data_parallel_breakdown["replica_all_reduce"] - backward


def test_a_shard_group_of_two_nodes_sends_its_gathers_over_the_network() -> None:
    per_node = estimate_step(job(software=HSDP_BF16))
    two_nodes = estimate_step(job(software=HSDP_BF16, shard_group=16))
    assert two_nodes.data_parallel_breakdown["shard_group"] > per_node.data_parallel_breakdown["shard_group"]
    assert (
        two_nodes.data_parallel_breakdown["replica_all_reduce"] < per_node.data_parallel_breakdown["replica_all_reduce"]
    )


def test_hsdp_13b_on_128_a100s_at_400_gbps_matches_fms_fsdp() -> None:
    # fms-fsdp README (github.com/foundation-model-stack/fms-fsdp): 13b, 128 x A100, HSDP, no activation
    # checkpointing, batch 1 per GPU: 1700 tokens/s/GPU. No parameter is fitted on HSDP rows.
    from planner.published import A100_400G, FMS_HSDP

    step = estimate_step(
        Job(get_model_args("llama2-13b"), A100_400G, 16, 4096, 1, software=FMS_HSDP),
    )
    assert step.tokens_per_s_per_device == pytest.approx(1700, rel=0.15)


def test_a_pipeline_stage_hides_its_once_per_step_traffic_in_its_bubble() -> None:
    """ZeRO-1 with PP: the reduce-scatter after the last backward and the gather before the first forward run in the
    stage's idle time (half the bubble each) on top of the overlap window, so more bubble hides more of them."""
    from planner.step_time import _data_parallel_traffic, _exposed_data_parallel

    pipelined = job(
        nodes=8, tensor_parallel=8, pipeline_parallel=4, global_batch=32, hardware=hardware("p5.48xlarge", network_gbps=400),
        software=Software(sharding="zero1"),
    )  # fmt: skip
    traffic = _data_parallel_traffic(pipelined, CALIBRATED)
    assert traffic.per_step.seconds > 0 and traffic.per_step_gather.seconds > 0  # reduce-scatter, gather: apart
    step = estimate_step(pipelined)
    blocks = LLAMA_8B.n_layers // 4
    args = (traffic, 0.01, 0.02, step.micro_batches, blocks, CALIBRATED.overlap("fsdp"))
    busy, idle = _exposed_data_parallel(*args), _exposed_data_parallel(*args, idle_s=step.pipeline_bubble_s)
    assert idle < busy
    # never below the one bucket of each that cannot hide
    floor = (traffic.per_step.seconds + traffic.per_step_gather.seconds) / traffic.per_step_buckets
    assert _exposed_data_parallel(*args, idle_s=1e3) == pytest.approx(floor)


def test_megatron_buckets_grow_with_the_data_parallel_group() -> None:
    """max(40 M, 1 M x DP) parameters per bucket on nemo; torch DDP's 25 MB on fsdp."""
    from planner.job import backend_software
    from planner.step_time import _buckets

    small, large = job(nodes=2, software=backend_software("nemo")), job(nodes=64, software=backend_software("nemo"))
    grads = 4 * 8.03e9
    assert _buckets(grads, small) == 201  # 8.03 B / 40 M
    assert _buckets(grads, large) == 16  # 8.03 B / 512 M (DP 512)
    assert _buckets(grads, job(nodes=64)) == 1226  # 32.12 GB / 25 MiB, rounded up
