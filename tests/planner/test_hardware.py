import pytest

from planner.hardware import ACCELERATOR_BY_FAMILY, HardwareError, hardware
from spec.platform.instances import ACCELERATED_TYPES, instance_facts


@pytest.mark.parametrize("name", ACCELERATED_TYPES)
def test_every_accelerated_instance_type_has_an_accelerator(name: str) -> None:
    node = hardware(name)
    assert node.peak_flops_per_device > 0 and node.hbm_bytes_per_s_per_device > 0
    assert instance_facts(name).family in ACCELERATOR_BY_FAMILY


def test_trainium_devices_are_neuroncores() -> None:
    node = hardware("trn1.32xlarge")
    assert node.devices_per_node == 32
    assert node.peak_flops_per_device == pytest.approx(95e12)  # 190 TFLOP/s per chip, two cores
    assert node.memory_gib_per_device == 16.0


def test_h200_shares_the_h100_compute_die_with_more_bandwidth() -> None:
    h100, h200 = hardware("p5.48xlarge"), hardware("p5e.48xlarge")
    assert h100.accelerator.compute_die == h200.accelerator.compute_die == "H100"
    assert h200.hbm_bytes_per_s_per_device > h100.hbm_bytes_per_s_per_device


def test_overrides_replace_network_and_price_only() -> None:
    node = hardware("p5.48xlarge", network_gbps=800, usd_per_hour=10.0)
    assert node.network_bytes_per_s_per_node == 100e9
    assert node.usd_per_node_hour == 10.0
    assert node.peak_flops_per_device == hardware("p5.48xlarge").peak_flops_per_device


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"instance_type": "p9.huge"}, "'p9.huge'"),
        ({"instance_type": "m5.xlarge"}, "--instance: 'm5.xlarge' has no accelerator"),
        ({"instance_type": "p5.48xlarge", "usd_per_hour": -1.0}, "--price-per-hour: -1.0"),
        ({"instance_type": "p5.48xlarge", "network_gbps": 0.0}, "network_gbps: 0.0"),
    ],
)
def test_bad_hardware_is_one_line_naming_the_value(kwargs: dict, needle: str) -> None:
    with pytest.raises(HardwareError) as caught:
        hardware(**kwargs)
    assert needle in str(caught.value) and "\n" not in str(caught.value)


def test_blackwell_nodes_have_hgx_bandwidths_and_an_unfitted_die() -> None:
    from planner.calibration import CALIBRATED

    b200, b300 = hardware("p6-b200.48xlarge"), hardware("p6-b300.48xlarge")
    assert b200.accelerator.compute_die == b300.accelerator.compute_die == "Blackwell"
    assert b200.hbm_bytes_per_s_per_device == b300.hbm_bytes_per_s_per_device == 8e12
    assert b200.local_link_bytes_per_s_per_device == 900e9  # NVLink 5: 1.8 TB/s per GPU, both directions
    assert b200.peak_fp8_flops_per_device == 4500e12
    # No published Blackwell table is fitted yet: the die borrows Hopper's fraction, stated as such.
    for backend in ("fsdp", "nemo"):
        assert CALIBRATED.matmul(backend, "Blackwell") == CALIBRATED.matmul(backend, "H100")
    assert CALIBRATED.matmul("neuron", "Trainium2") == CALIBRATED.matmul("neuron", "Trainium1")


def test_trainium2_devices_are_logical_neuroncores() -> None:
    node = hardware("trn2.48xlarge")
    assert node.devices_per_node == 64
    assert node.peak_flops_per_device == pytest.approx(10.7e15 / 64)
    assert node.memory_gib_per_device == 24.0
    assert node.accelerator.compute_die == "Trainium2"


def test_the_local_cpu_node_is_one_device_holding_the_nodes_memory_with_no_rate() -> None:
    from planner.hardware import LOCAL_HARDWARE
    from spec.platform.instances import LOCAL_INSTANCE

    node = hardware("local-cpu")
    assert node is LOCAL_HARDWARE and node.instance.name == LOCAL_INSTANCE.name == node.label
    assert (node.devices_per_node, node.memory_gib_per_device) == (1, LOCAL_INSTANCE.memory_gib)
    assert node.peak_flops_per_device == 0 and not node.timed
    assert hardware("p5.48xlarge").timed


@pytest.mark.parametrize(
    ("overrides", "line"),
    [
        ({"usd_per_hour": 3.0}, "--price-per-hour: 3.0: the local CPU cluster (local-cpu) is not priced"),
        ({"network_gbps": 100.0}, "network_gbps: 100.0: the local CPU cluster (local-cpu) has no network the planner "
         "models"),
    ],
)  # fmt: skip
def test_the_local_cpu_node_takes_no_price_or_network(overrides: dict[str, float], line: str) -> None:
    with pytest.raises(HardwareError) as refused:
        hardware("local-cpu", **overrides)  # type: ignore[arg-type]
    assert str(refused.value) == line
