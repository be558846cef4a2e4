"""The hardware catalogue (spec/platform/instances.py) is the one place an instance type is added.

Registry test: every accelerated entry carries every fact its readers need (the planner, its calibration, the fabric
check, the job environment and ParallelCluster's Slurm GRES), read through the readers themselves, so an incomplete
entry fails here by name. Then a made-up GPU type added to the catalogue alone is usable by each of them.
"""

from __future__ import annotations

import re

import pytest

from cluster.fabric.thresholds import NVLINK_FRACTION, busbw_threshold
from cluster.slurm_names import partitions
from planner.calibration import CALIBRATED
from planner.hardware import hardware
from planner.plan import main as plan_main
from slurm.backends import STACKS
from slurm.errors import SubmitError
from slurm.netenv import gpu_env
from slurm.target import Target
from spec.platform.instances import (
    ACCELERATED_TYPES,
    CHIPS,
    GPUS,
    INSTANCE_TYPES,
    ChipFacts,
    GpuFacts,
    InstanceFacts,
    instance_facts,
)

# The planner's fitted stacks each accelerator kind runs, from the backend registry (slurm.backends).
BACKENDS_ON = {
    accelerator: tuple(name for name, stack in STACKS.items() if stack.accelerator == accelerator)
    for accelerator in ("gpu", "neuron")
}


def _target(facts: InstanceFacts) -> Target:
    return Target(partition="q", queue="q", instance=facts, efa=facts.efa_capable, shared_dir="/fsx")


def _one_queue_config(instance_type: str) -> dict[str, object]:
    resource = {"Name": "r", "InstanceType": instance_type, "MinCount": 0, "MaxCount": 2, "Efa": {"Enabled": True}}
    return {"Scheduling": {"SlurmQueues": [{"Name": "q", "ComputeResources": [resource]}]}}


@pytest.mark.parametrize("name", ACCELERATED_TYPES)
def test_every_accelerated_entry_has_what_the_planner_needs(name: str) -> None:
    node = hardware(name)
    assert node.peak_flops_per_device > 0 and node.memory_gib_per_device > 0
    assert node.hbm_bytes_per_s_per_device > 0 and node.local_link_bytes_per_s_per_device > 0
    assert node.accelerator.source, f"{name}: its chip's bandwidths name no source"
    for backend in BACKENDS_ON[node.instance.accelerator]:
        assert 0 < CALIBRATED.matmul(backend, node.accelerator.compute_die) < 1, (name, backend)


@pytest.mark.parametrize("name", ACCELERATED_TYPES)
def test_every_accelerated_entry_has_a_fabric_threshold(name: str) -> None:
    facts = instance_facts(name)
    assert busbw_threshold(facts, 2).min_busbw_gb_per_s > 0
    if facts.published_busbw is not None:
        assert facts.published_busbw.source and facts.published_busbw.busbw_gb_per_s > 0
    if facts.accelerator == "gpu":  # one GPU node checks its NVLink
        assert busbw_threshold(facts, 1).min_busbw_gb_per_s == pytest.approx(
            NVLINK_FRACTION * facts.chip.local_link_bytes_per_s / 1e9  # type: ignore[union-attr]
        )


@pytest.mark.parametrize("name", [n for n in ACCELERATED_TYPES if instance_facts(n).accelerator == "gpu"])
def test_every_gpu_entry_has_its_efa_environment_and_slurm_gres(name: str) -> None:
    facts = instance_facts(name)
    floor = facts.min_aws_ofi_nccl
    assert gpu_env(_target(facts), aws_ofi_nccl=".".join(map(str, floor or (1, 7, 3))))["FI_PROVIDER"] == "efa"
    (part,) = partitions(_one_queue_config(name))
    gres = part.ranges[0].gres
    assert gres is not None and re.fullmatch(rf"gpu:[a-z0-9]+:{facts.accelerators_per_node}", gres), gres


@pytest.fixture
def x100(monkeypatch: pytest.MonkeyPatch) -> InstanceFacts:
    """A made-up Blackwell successor, put in the catalogue and nowhere else."""
    gpu = GpuFacts("NVIDIA X100", "X100", 3000e12, 192.0, 6000e12, (10, 0), ec2_gpu_name="X100")
    chip = ChipFacts("X100", "X-die", 10e12, 1200e9, matmul_fraction_of="H100", source="made up for this test")
    facts = InstanceFacts(
        "p9-x100.48xlarge", "gpu", 8, gpu.memory_gib, 16, 6400, gpu.peak_bf16_flops, 150.0, 192, 2048,
        gpu_device=gpu.device_name, peak_fp8_flops_per_accelerator=gpu.peak_fp8_flops, chip=chip,
        min_aws_ofi_nccl=(1, 8, 0),
    )  # fmt: skip
    monkeypatch.setitem(GPUS, gpu.device_name, gpu)
    monkeypatch.setitem(CHIPS, chip.name, chip)
    monkeypatch.setitem(INSTANCE_TYPES, facts.name, facts)
    return facts


def test_an_instance_type_added_to_the_catalogue_alone_plans(
    x100: InstanceFacts, capsys: pytest.CaptureFixture
) -> None:
    args = ["--model", "llama3-8b", "--instance", x100.name, "--nodes", "2", "--seq", "8192", "--micro-batch", "1"]
    assert plan_main(args) == 0
    assert f"2 x {x100.name} (16 devices, X100)" in capsys.readouterr().out
    node = hardware(x100.name)
    assert node.hbm_bytes_per_s_per_device == 10e12 and node.local_link_bytes_per_s_per_device == 1200e9
    assert CALIBRATED.matmul("fsdp", "X-die") == CALIBRATED.matmul("fsdp", "H100")  # borrowed, as the entry says


def test_an_instance_type_added_to_the_catalogue_alone_has_fabric_floors(x100: InstanceFacts) -> None:
    # No published baseline: 70 % of the line rate across nodes; one node: 60 % of its NVLink.
    assert busbw_threshold(x100, 1).min_busbw_gb_per_s == pytest.approx(NVLINK_FRACTION * 1200)
    assert busbw_threshold(x100, 2).min_busbw_gb_per_s == pytest.approx(0.70 * 6400 / 8)


def test_an_instance_type_added_to_the_catalogue_alone_gets_its_efa_floor_and_gres(x100: InstanceFacts) -> None:
    with pytest.raises(SubmitError, match=r"1\.7\.3 is too old for p9-x100\.48xlarge \(needs 1\.8\.0 or newer\)"):
        gpu_env(_target(x100), aws_ofi_nccl="1.7.3")
    assert gpu_env(_target(x100), aws_ofi_nccl="1.8.0")["NCCL_NET"] == "AWS Libfabric"
    (part,) = partitions(_one_queue_config(x100.name))
    assert part.ranges[0].gres == "gpu:x100:8"
    assert part.gres_lines() == ["NodeName=q-dy-r-[1-2] Name=gpu Type=x100 File=/dev/nvidia[0-7]"]
