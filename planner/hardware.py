"""What the planner needs to know about a node beyond spec.platform.instances: memory and link bandwidths per device.

A "device" here is one training worker: a GPU, or a NeuronCore on Trainium (two per chip, each with its own half
of the chip's HBM and compute). Everything per device in the planner uses that unit.

Bandwidths are vendor figures (HBM: A100 40 GB 1.555 TB/s, A100 80 GB 2.039 TB/s, H100 SXM 3.35 TB/s, H200
4.8 TB/s, Trainium1 820 GB/s per chip; NVLink 3/4: 300/450 GB/s per GPU per direction). NeuronLink-v2's per-chip
figure is not published in one place; 384 GB/s per chip is an assumption (Trainium's matmul fraction is fitted on
top of it, so an error here moves into that parameter).

Blackwell (HGX B200 and B300, https://www.nvidia.com/en-us/data-center/hgx/, read 2026-11-28): 8 TB/s HBM3e per
GPU and NVLink 5 at 1.8 TB/s per GPU (900 GB/s each way). Trainium2 (Neuron's trn2 architecture page): 46.4 TB/s
HBM for 16 chips, 2.9 TB/s per chip; NeuronLink-v3's per-chip rate one way, 640 GB/s, is an assumption of the same
kind as Trainium1's. Neither die has a published table the planner is fitted on yet, so each borrows the nearest
fitted matmul fraction (planner.calibration says which).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from spec.errors import UserError
from spec.platform.instances import InstanceFacts, instance_facts


@dataclass(frozen=True)
class Accelerator:
    name: str
    compute_die: str  # devices that share a matmul efficiency parameter (H200 is an H100 die with more HBM)
    hbm_bytes_per_s: float  # per accelerator (chip)
    local_link_bytes_per_s: float  # NVLink / NeuronLink, per accelerator, one direction


ACCELERATORS: dict[str, Accelerator] = {
    "A100-40GB": Accelerator("A100-40GB", "A100", 1.555e12, 300e9),
    "A100-80GB": Accelerator("A100-80GB", "A100", 2.039e12, 300e9),
    "H100": Accelerator("H100", "H100", 3.35e12, 450e9),
    "H200": Accelerator("H200", "H100", 4.8e12, 450e9),
    "Trainium1": Accelerator("Trainium1", "Trainium1", 820e9, 384e9),
    "B200": Accelerator("B200", "Blackwell", 8e12, 900e9),
    "B300": Accelerator("B300", "Blackwell", 8e12, 900e9),
    "Trainium2": Accelerator("Trainium2", "Trainium2", 2.9e12, 640e9),
}

# Instance family -> accelerator (spec.platform.instances names the families; this adds the chip behind them).
ACCELERATOR_BY_FAMILY: dict[str, str] = {
    "p4d": "A100-40GB",
    "p4de": "A100-80GB",
    "p5": "H100",
    "p5e": "H200",
    "p5en": "H200",
    "trn1": "Trainium1",
    "trn1n": "Trainium1",
    "p6-b200": "B200",
    "p6-b300": "B300",
    "trn2": "Trainium2",
}


class HardwareError(UserError):
    """An instance type the planner cannot model; one line naming the argument and value."""


@dataclass(frozen=True)
class Hardware:
    """One node type as the planner sees it. `label` says where the figures come from when they differ from the
    instance facts (a calibration cluster with another network, or a reserved price)."""

    instance: InstanceFacts
    accelerator: Accelerator
    label: str

    @property
    def devices_per_node(self) -> int:
        return self.instance.workers_per_node

    @property
    def cores_per_accelerator(self) -> int:
        return self.instance.cores_per_accelerator

    @property
    def peak_flops_per_device(self) -> float:
        return self.instance.peak_bf16_flops_per_accelerator / self.cores_per_accelerator

    @property
    def peak_fp8_flops_per_device(self) -> float | None:
        """Dense FP8 FLOP/s per device from the instance table; None where no FP8 rate is cited."""
        fp8 = self.instance.peak_fp8_flops_per_accelerator
        return None if fp8 is None else fp8 / self.cores_per_accelerator

    @property
    def memory_gib_per_device(self) -> float:
        return self.instance.accelerator_memory_gib / self.cores_per_accelerator

    @property
    def hbm_bytes_per_s_per_device(self) -> float:
        return self.accelerator.hbm_bytes_per_s / self.cores_per_accelerator

    @property
    def local_link_bytes_per_s_per_device(self) -> float:
        return self.accelerator.local_link_bytes_per_s / self.cores_per_accelerator

    @property
    def network_bytes_per_s_per_node(self) -> float:
        return self.instance.network_gbps * 1e9 / 8

    @property
    def usd_per_node_hour(self) -> float:
        return self.instance.on_demand_usd_per_hour


def hardware(
    instance_type: str, *, network_gbps: float | None = None, usd_per_hour: float | None = None, label: str = ""
) -> Hardware:
    """Hardware for an instance type from spec.platform.instances, optionally with another network or price."""
    try:
        facts = instance_facts(instance_type)
    except KeyError as error:
        raise HardwareError(f"--instance: {error}") from None
    accelerator_name = ACCELERATOR_BY_FAMILY.get(facts.family)
    if accelerator_name is None:
        trainable = ", ".join(name for name in sorted(ACCELERATOR_BY_FAMILY))
        raise HardwareError(f"--instance: {instance_type!r} has no accelerator the planner models ({trainable})")
    if network_gbps is not None:
        if network_gbps <= 0:
            raise HardwareError(f"network_gbps: {network_gbps!r} must be positive")
        facts = dataclasses.replace(facts, network_gbps=network_gbps)
    if usd_per_hour is not None:
        if usd_per_hour < 0:
            raise HardwareError(f"--price-per-hour: {usd_per_hour!r} must not be negative")
        facts = dataclasses.replace(facts, on_demand_usd_per_hour=usd_per_hour)
    return Hardware(facts, ACCELERATORS[accelerator_name], label or instance_type)
