import pytest

from spec.platform.instances import (
    ACCELERATED_TYPES,
    HEAD_NODE_TYPES,
    INSTANCE_TYPES,
    InstanceFacts,
    UnknownInstanceType,
    instance_facts,
    on_demand_usd_per_hour,
)


def test_every_required_type_is_present() -> None:
    for name in (
        "p4d.24xlarge",
        "p4de.24xlarge",
        "p5.48xlarge",
        "p5e.48xlarge",
        "p5en.48xlarge",
        "trn1.32xlarge",
        "trn1n.32xlarge",
    ):
        assert name in ACCELERATED_TYPES
    assert {"c5.xlarge", "c6i.2xlarge", "m5.2xlarge", "m6i.xlarge", "m7i.4xlarge"} <= set(HEAD_NODE_TYPES)


@pytest.mark.parametrize(
    ("name", "efa", "gbps"),
    [
        ("p4d.24xlarge", 4, 400),
        ("p4de.24xlarge", 4, 400),
        ("p5.48xlarge", 32, 3200),
        ("p5e.48xlarge", 32, 3200),
        ("p5en.48xlarge", 16, 3200),
        ("trn1.32xlarge", 8, 800),
        ("trn1n.32xlarge", 16, 1600),
    ],
)
def test_efa_interfaces_and_bandwidth(name: str, efa: int, gbps: float) -> None:
    facts = instance_facts(name)
    assert (facts.efa_interfaces, facts.network_gbps) == (efa, gbps)
    assert facts.efa_capable


def test_published_dense_bf16_peaks() -> None:
    assert instance_facts("p4d.24xlarge").peak_bf16_flops_per_accelerator == 312e12
    assert instance_facts("p5.48xlarge").peak_bf16_flops_per_accelerator == 989e12
    assert instance_facts("p5en.48xlarge").peak_bf16_flops_per_accelerator == 989e12
    trn1 = instance_facts("trn1.32xlarge")
    assert trn1.peak_bf16_flops_per_accelerator == 190e12
    # 16 chips x 190 TFLOP/s is the published 3.04 PFLOP/s per instance
    assert trn1.peak_bf16_flops_per_node == pytest.approx(3.04e15)


def test_workers_per_node_counts_neuron_cores() -> None:
    assert instance_facts("trn1.32xlarge").accelerators_per_node == 16
    assert instance_facts("trn1.32xlarge").workers_per_node == 32
    assert instance_facts("p5.48xlarge").workers_per_node == 8


def test_accelerator_kinds_and_memory() -> None:
    assert instance_facts("p4d.24xlarge").accelerator_memory_gib == 40
    assert instance_facts("p4de.24xlarge").accelerator_memory_gib == 80
    assert instance_facts("p5e.48xlarge").accelerator_memory_gib == 141
    assert instance_facts("trn1n.32xlarge").accelerator == "neuron"
    head = instance_facts("m6i.2xlarge")
    assert (head.accelerator, head.accelerators_per_node, head.efa_interfaces) == ("none", 0, 0)


def test_table_is_self_consistent() -> None:
    for name, facts in INSTANCE_TYPES.items():
        assert isinstance(facts, InstanceFacts)
        assert facts.name == name
        assert facts.on_demand_usd_per_hour > 0
        assert facts.vcpus > 0 and facts.memory_gib > 0
        if facts.accelerator == "none":
            assert facts.accelerators_per_node == 0 and facts.peak_bf16_flops_per_accelerator == 0
        else:
            assert facts.accelerators_per_node > 0 and facts.peak_bf16_flops_per_accelerator > 0


def test_facts_are_frozen() -> None:
    with pytest.raises(AttributeError):
        instance_facts("p5.48xlarge").efa_interfaces = 1  # type: ignore[misc]


def test_unknown_type_is_a_one_line_error() -> None:
    with pytest.raises(UnknownInstanceType) as caught:
        instance_facts("p9.96xlarge")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("instance type 'p9.96xlarge' is not in the facts table (known: p4d.24xlarge, ")
    assert isinstance(caught.value, KeyError)


def test_price_overrides_win_over_the_table() -> None:
    assert on_demand_usd_per_hour("p5.48xlarge") == instance_facts("p5.48xlarge").on_demand_usd_per_hour
    assert on_demand_usd_per_hour("p5.48xlarge", {"p5.48xlarge": 40.0}) == 40.0
    assert on_demand_usd_per_hour("trn1.32xlarge", {"p5.48xlarge": 40.0}) == 21.50


# Issue 35: Blackwell and Trainium2 queue types, with the figures their vendors publish.
@pytest.mark.parametrize(
    ("name", "gpus", "device", "memory", "efa", "gbps", "vcpus", "host_gib"),
    [
        ("p6-b200.48xlarge", 8, "NVIDIA B200", 180, 8, 3200, 192, 2048),
        ("p6-b300.48xlarge", 8, "NVIDIA B300 SXM6 AC", 268, 16, 6400, 192, 4096),
    ],
)
def test_blackwell_instances(
    name: str, gpus: int, device: str, memory: float, efa: int, gbps: float, vcpus: int, host_gib: float
) -> None:
    facts = instance_facts(name)
    assert (facts.accelerator, facts.accelerators_per_node, facts.gpu_device) == ("gpu", gpus, device)
    assert (facts.accelerator_memory_gib, facts.efa_interfaces, facts.network_gbps) == (memory, efa, gbps)
    assert (facts.vcpus, facts.memory_gib, facts.workers_per_node) == (vcpus, host_gib, gpus)
    # HGX B200 / B300: 2.25 PFLOP/s dense bf16 and 4.5 PFLOP/s dense FP8 per GPU (half the sparse figures)
    assert facts.peak_bf16_flops_per_accelerator == 2250e12
    assert facts.peak_fp8_flops_per_accelerator == 4500e12
    assert facts.on_demand_usd_per_hour > 0


def test_blackwell_gpus_carry_their_compute_capability() -> None:
    from spec.platform.instances import GPUS

    assert GPUS["NVIDIA B200"].compute_capability == (10, 0)
    assert GPUS["NVIDIA B300 SXM6 AC"].compute_capability == (10, 3)
    assert GPUS["NVIDIA H100 80GB HBM3"].compute_capability == (9, 0)
    assert GPUS["NVIDIA A100-SXM4-80GB"].compute_capability == (8, 0)


def test_trn2_counts_logical_neuron_cores_and_its_published_peak() -> None:
    trn2 = instance_facts("trn2.48xlarge")
    assert (trn2.accelerator, trn2.accelerators_per_node, trn2.accelerator_memory_gib) == ("neuron", 16, 96)
    assert (trn2.efa_interfaces, trn2.network_gbps, trn2.vcpus, trn2.memory_gib) == (16, 3200, 192, 2048)
    # Neuron's trn2 page: 10.7 PFLOP/s dense bf16 and 20.8 FP8 per instance; LNC=2 (the default): 4 logical
    # NeuronCores per chip, 64 workers per node
    assert trn2.peak_bf16_flops_per_node == pytest.approx(10.7e15, rel=0.01)
    assert trn2.peak_fp8_flops_per_accelerator is not None
    assert trn2.peak_fp8_flops_per_accelerator * 16 == pytest.approx(20.8e15, rel=0.01)
    assert trn2.workers_per_node == 64


# Issue 41: the one hardware catalogue. Every accelerated entry carries its chip; every GPU entry its CUDA device,
# the EC2 GPU name behind Slurm's GRES and a compute capability some CUDA release supports.
@pytest.mark.parametrize("name", ACCELERATED_TYPES)
def test_every_accelerated_entry_is_complete(name: str) -> None:
    from spec.platform.instances import CHIPS, GPUS, MIN_CUDA

    facts = instance_facts(name)
    chip = facts.chip
    assert chip is not None and CHIPS[chip.name] is chip, f"{name}: no chip from CHIPS"
    assert chip.hbm_bytes_per_s > 0 and chip.local_link_bytes_per_s > 0 and chip.compute_die and chip.source
    assert chip.matmul_fraction_of in (None, *(c.compute_die for c in CHIPS.values() if c.matmul_fraction_of is None))
    assert (chip.neuron_stack is not None) == (facts.accelerator == "neuron"), f"{name}: neuron_stack"
    if facts.accelerator == "gpu":
        gpu = GPUS[facts.gpu_device or ""]
        assert gpu.ec2_gpu_name, f"{name}: {gpu.device_name} has no ec2_gpu_name"
        assert gpu.compute_capability in MIN_CUDA
        assert (facts.accelerator_memory_gib, facts.peak_bf16_flops_per_accelerator) == (
            gpu.memory_gib,
            gpu.peak_bf16_flops,
        )


def test_cpu_entries_have_no_chip_and_no_gpu_facts() -> None:
    for name in HEAD_NODE_TYPES:
        facts = instance_facts(name)
        assert (facts.chip, facts.gpu_device, facts.published_busbw, facts.min_aws_ofi_nccl) == (None,) * 4


def test_p5_and_p6_need_aws_ofi_nccl_1_7_3_and_p4_has_its_published_baseline() -> None:
    for name in ("p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge", "p6-b300.48xlarge"):
        assert instance_facts(name).min_aws_ofi_nccl == (1, 7, 3), name
    for name in ("p4d.24xlarge", "p4de.24xlarge"):
        facts = instance_facts(name)
        assert facts.min_aws_ofi_nccl is None
        assert facts.published_busbw is not None and facts.published_busbw.busbw_gb_per_s == 78.0


def test_the_local_cpu_node_is_catalogued_apart_from_the_deployable_types() -> None:
    from spec.platform.instances import LOCAL_INSTANCE

    assert LOCAL_INSTANCE.name == "local-cpu" and LOCAL_INSTANCE.accelerator == "none"
    assert LOCAL_INSTANCE.name not in INSTANCE_TYPES and LOCAL_INSTANCE not in INSTANCE_TYPES.values()
    with pytest.raises(UnknownInstanceType):
        instance_facts(LOCAL_INSTANCE.name)
