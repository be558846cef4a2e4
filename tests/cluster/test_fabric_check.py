"""The verdict on fixture outputs and counter samples taken by the real sampler from fixture sysfs trees."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cluster.fabric.check import CheckInputs, Verdict, evaluate, read_transports
from cluster.fabric.counters import NodeSample, read_samples
from cluster.fabric.parsers import parse_all_reduce_perf, parse_nccom_test
from cluster.fabric.thresholds import busbw_threshold
from spec.platform.instances import instance_facts
from tests.cluster.test_fabric_counters import bump, efa_tree, memory_scratch, sample_nodes
from tests.cluster.test_fabric_parsers import fixture

GIB = 1 << 30
SOCKETS = (
    "EFA counters did not move: NCCL used sockets "
    "(check FI_PROVIDER, the aws-ofi-nccl plugin, the security group's self rule)"
)
P5_NEEDS = 20 * ((1 << 35) - 8)  # bytes each node must send for all_reduce_perf -b 8 -e 16G over 2 nodes


@pytest.fixture
def fast_tmp(tmp_path: Path) -> Iterator[Path]:
    with memory_scratch(tmp_path) as directory:
        yield directory


def counter_samples(
    tmp_path: Path,
    devices: int,
    traffic_per_device: int,
    nodes: tuple[str, ...] = ("n1", "n2"),
    during: Callable[[str, Path], None] | None = None,
) -> tuple[dict[str, NodeSample], dict[str, NodeSample]]:
    """Samples before and after a fake test that moved `traffic_per_device` bytes each way on every device."""
    trees = {node: efa_tree(tmp_path / "sys" / node, devices) for node in nodes}
    sample_nodes(trees, tmp_path / "before")
    for node, tree in trees.items():
        bump(tree, "tx_bytes", traffic_per_device)
        bump(tree, "rx_bytes", traffic_per_device)
        if during is not None:
            during(node, tree)
    sample_nodes(trees, tmp_path / "after")
    return read_samples(tmp_path / "before"), read_samples(tmp_path / "after")


def p5_verdict(tmp_path: Path, output: str, traffic_per_device: int, **options: object) -> Verdict:
    during = options.pop("during", None)
    before, after = counter_samples(tmp_path, 32, traffic_per_device, during=during)  # type: ignore[arg-type]
    inputs = CheckInputs(
        run=parse_all_reduce_perf(fixture(output)),
        threshold=busbw_threshold(instance_facts("p5.48xlarge"), 2),
        before=before,
        after=after,
        output_path="/fsx/fabric-checks/run/all_reduce_perf.out",
        expected_ranks=16,
        **options,  # type: ignore[arg-type]
    )
    return evaluate(inputs)


def test_a_healthy_p5_pair_passes(fast_tmp: Path) -> None:
    verdict = p5_verdict(fast_tmp, "all_reduce_perf-2x-p5.48xlarge.txt", traffic_per_device=P5_NEEDS // 32 + GIB)
    assert verdict.passed and verdict.warnings == []
    assert verdict.info[0] == (
        "busbw at the largest sizes (GB/s): 4 GiB 484.2/487.0, 8 GiB 483.3/491.3, 16 GiB 486.1/487.6; median 486.6, "
        "needs >= 389.6 for 2 x p5.48xlarge (80 % of the published 487 GB/s)"
    )
    assert "EFA bytes each node must exchange for this test: at least 640.0 GiB each way" in verdict.info
    assert verdict.render().splitlines()[0] == "fabric check: all_reduce_perf on 2 x p5.48xlarge, 16 ranks on 2 hosts"
    assert verdict.render().splitlines()[-1] == "fabric check: PASSED"


def test_sockets_fail_on_busbw_and_on_counters_that_did_not_move(fast_tmp: Path) -> None:
    verdict = p5_verdict(fast_tmp, "all_reduce_perf-2x-p5.48xlarge-sockets.txt", traffic_per_device=0)
    assert verdict.failures == [
        "busbw 2.9 GB/s < 389.6 GB/s expected for 2 x p5.48xlarge (80 % of the published 487 GB/s)",
        SOCKETS,
    ]
    assert verdict.render().splitlines()[-1] == "fabric check: FAILED (2 problems)"


def test_fast_numbers_without_efa_traffic_still_fail(fast_tmp: Path) -> None:
    verdict = p5_verdict(fast_tmp, "all_reduce_perf-2x-p5.48xlarge.txt", traffic_per_device=0)
    assert verdict.failures == [SOCKETS]


def test_traffic_below_what_the_test_needs_fails_per_node(fast_tmp: Path) -> None:
    verdict = p5_verdict(fast_tmp, "all_reduce_perf-2x-p5.48xlarge.txt", traffic_per_device=GIB)
    assert verdict.failures == [
        f"{node}: EFA carried 32 GiB out and 32 GiB in, less than the 640.0 GiB each way this test needs: part of "
        "it went another way (TCP sockets?)"
        for node in ("n1", "n2")
    ]


def test_idle_devices_error_counters_and_retransmits(fast_tmp: Path) -> None:
    def during(node: str, tree: Path) -> None:
        if node == "n2":
            idle = ["rdmap40s0", "rdmap41s0"]
            bump(tree, "tx_bytes", -(P5_NEEDS // 16), idle)
            bump(tree, "rx_bytes", -(P5_NEEDS // 16), idle)
            bump(tree, "impaired_remote_conn_events", 1, ["rdmap20s0"])
        bump(tree, "retrans_pkts", 40, ["rdmap16s0"])

    verdict = p5_verdict(
        fast_tmp, "all_reduce_perf-2x-p5.48xlarge.txt", traffic_per_device=P5_NEEDS // 16, during=during
    )
    assert verdict.failures == [
        "n2: 2 of 32 EFA devices carried no traffic: rdmap40s0, rdmap41s0 (a rail down or unused; compare "
        "`fi_info -p efa` with the instance's interfaces)",
        "n2: EFA error counters grew: rdmap20s0 impaired_remote_conn_events +1",
    ]
    assert verdict.warnings == [
        f"{node}: rdmap16s0 retrans_pkts +40 (SRD resends lost packets; many of them cost bandwidth)"
        for node in ("n1", "n2")
    ]


def test_a_run_on_one_host_never_crossed_nodes(fast_tmp: Path) -> None:
    verdict = p5_verdict(fast_tmp, "all_reduce_perf-1x-p5.48xlarge.txt", traffic_per_device=0)
    assert verdict.failures == [
        "all_reduce_perf ran 8 ranks, expected 16 (2 nodes x 8 per node)",
        "all_reduce_perf ranks ran on 1 host(s) (ip-10-1-33-17), not 2: the test never crossed nodes",
        SOCKETS,
    ]


def test_a_crashed_run_reports_the_exit_status_and_the_tools_errors(fast_tmp: Path) -> None:
    verdict = p5_verdict(
        fast_tmp, "all_reduce_perf-2x-p5.48xlarge-crashed.txt", traffic_per_device=GIB, test_exit_code=1
    )
    assert verdict.failures[:4] == [
        "all_reduce_perf exited with status 1 (output: /fsx/fabric-checks/run/all_reduce_perf.out)",
        "all_reduce_perf reported: ip-10-1-33-212: Test NCCL failure common.cu:1304 'remote process exited or there "
        "was a network error / '",
        "all_reduce_perf reported: .. ip-10-1-33-212 pid 21881: Test failure common.cu:1167",
        "all_reduce_perf output ends after 21 sizes without its 'Avg bus bandwidth' line (the test crashed or was "
        "killed; see /fsx/fabric-checks/run/all_reduce_perf.out)",
    ]
    # 8 B .. 8 MiB only: too small to judge bandwidth
    assert verdict.failures[4] == (
        "largest message measured is 8 MiB: bus bandwidth approaches line rate only from 1 GiB, so the run cannot be "
        "judged"
    )


def test_a_missing_node_sample_and_a_short_device_count(fast_tmp: Path) -> None:
    def during(node: str, tree: Path) -> None:
        if node == "n2":
            for file in (tree / "class/infiniband/rdmap47s0").rglob("*"):
                if file.is_file():
                    file.unlink()

    before, after = counter_samples(fast_tmp, 32, P5_NEEDS, during=during)
    del after["n1"]
    inputs = CheckInputs(
        run=parse_all_reduce_perf(fixture("all_reduce_perf-2x-p5.48xlarge.txt")),
        threshold=busbw_threshold(instance_facts("p5.48xlarge"), 2),
        before=before,
        after=after,
        output_path="out",
    )
    assert evaluate(inputs).failures == [
        "n1: no EFA counter sample from after the test (sampling failed there)",
        f"n2: 31 EFA devices under {fast_tmp}/sys/n2/class/infiniband, expected 32 for p5.48xlarge",
        "n2: EFA devices changed during the test: rdmap47s0",
    ]


def nccom_verdict(tmp_path: Path, output: str, traffic_per_device: int, test_exit_code: int = 0) -> Verdict:
    before, after = counter_samples(tmp_path, 8, traffic_per_device)
    return evaluate(
        CheckInputs(
            run=parse_nccom_test(fixture(output)),
            threshold=busbw_threshold(instance_facts("trn1.32xlarge"), 2),
            before=before,
            after=after,
            output_path="nccom-test.out",
            test_exit_code=test_exit_code,
            iterations=20,
        )
    )


def test_a_healthy_trn1_pair_passes(fast_tmp: Path) -> None:
    verdict = nccom_verdict(fast_tmp, "nccom-test-2x-trn1.32xlarge.txt", traffic_per_device=11 * GIB)
    assert verdict.passed, verdict.render()
    assert verdict.info[0] == (
        "busbw at the largest sizes (GB/s): 1 GiB 54.7, 2 GiB 55.4, 4 GiB 55.3; median 55.3, "
        "needs >= 40.0 for 2 x trn1.32xlarge (40 % of 800 Gbps)"
    )
    assert "EFA bytes each node must exchange for this test: at least 80.0 GiB each way" in verdict.info


def test_a_trn1_pair_without_efa_traffic_fails_with_the_neuron_hint(fast_tmp: Path) -> None:
    verdict = nccom_verdict(fast_tmp, "nccom-test-2x-trn1.32xlarge.txt", traffic_per_device=0)
    assert verdict.failures == [
        "EFA counters did not move: the Neuron runtime did not use EFA (check FI_PROVIDER=efa, "
        "aws-neuronx-collectives, the security group's self rule)"
    ]


def test_a_failed_nccom_run(fast_tmp: Path) -> None:
    verdict = nccom_verdict(
        fast_tmp, "nccom-test-2x-trn1.32xlarge-failed.txt", traffic_per_device=GIB, test_exit_code=1
    )
    assert verdict.failures[:3] == [
        "nccom-test exited with status 1 (output: nccom-test.out)",
        "nccom-test reported: 1048576    Failure running neuron-bench - log file /tmp/nccom_test_log_x3k9w2ad.log",
        "nccom-test reported: 1 errors found - test failed",
    ]


@pytest.mark.parametrize(
    ("lines", "info", "failures"),
    [
        (
            ["NCCL INFO NET/OFI Selected Provider is efa (found 4 nics)", "NCCL INFO Using network Libfabric"],
            "NCCL network: Libfabric on 2 ranks; libfabric provider: efa on 2 ranks",
            [],
        ),
        (
            ["NCCL INFO NET/Socket : Using [0]ens32:10.1.33.17<0>", "NCCL INFO Using network Socket"],
            "NCCL network: Socket on 2 ranks; libfabric provider: not logged",
            [
                "NCCL chose the Socket transport on 2 ranks: the aws-ofi-nccl plugin did not load (check "
                "LD_LIBRARY_PATH for libnccl-net, FI_PROVIDER=efa)"
            ],
        ),
        (
            ["NCCL INFO NET/OFI Selected Provider is tcp (found 1 nics)", "NCCL INFO Using network Libfabric"],
            "NCCL network: Libfabric on 2 ranks; libfabric provider: tcp on 2 ranks",
            ["libfabric picked a provider other than efa on 2 ranks (FI_PROVIDER=efa?)"],
        ),
    ],
)
def test_the_transport_nccl_logged_per_rank(fast_tmp: Path, lines: list[str], info: str, failures: list[str]) -> None:
    logs = []
    for pid in (4242, 4243):
        log = fast_tmp / f"ip-10-1-33-17.{pid}.log"
        log.write_text("".join(f"ip-10-1-33-17:{pid}:{pid} [0] {line}\n" for line in lines))
        logs.append(log)
    verdict = p5_verdict(fast_tmp, "all_reduce_perf-2x-p5.48xlarge.txt", P5_NEEDS, transports=read_transports(logs))
    assert info in verdict.info and verdict.failures == failures


def test_one_node_is_judged_on_nvlink_and_needs_no_efa_traffic(fast_tmp: Path) -> None:
    before, after = counter_samples(fast_tmp, 32, 0, nodes=("n1",))
    verdict = evaluate(
        CheckInputs(
            run=parse_all_reduce_perf(fixture("all_reduce_perf-1x-p5.48xlarge.txt")),
            threshold=busbw_threshold(instance_facts("p5.48xlarge"), 1),
            before=before,
            after=after,
            output_path="all_reduce_perf.out",
            expected_ranks=8,
        )
    )
    assert verdict.passed, verdict.render()
    assert verdict.info[0].endswith("needs >= 270.0 for 1 x p5.48xlarge over NVLink (60 % of 450 GB/s per GPU)")
    assert "one node: the all-reduce runs over NVLink; EFA counters are checked for errors only" in verdict.info
