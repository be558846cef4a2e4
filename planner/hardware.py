"""The planner's view of a node: spec.platform.instances' facts per device.

A "device" here is one training worker: a GPU, or a NeuronCore on Trainium (two per chip, each with its own half
of the chip's HBM and compute). Everything per device in the planner uses that unit. The chip's HBM and link
bandwidths and its compute die are catalogue facts (spec.platform.instances.CHIPS, with their sources). The local
CPU cluster's node (spec.platform.instances.LOCAL_INSTANCE) is one device holding the node's memory, with no rate:
the planner plans its memory and times nothing there.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from spec.errors import UserError
from spec.platform.hardware_facts import ChipFacts
from spec.platform.instances import CHIPS, INSTANCE_TYPES, LOCAL_INSTANCE, InstanceFacts, instance_facts

# The planner's name for a chip; a calibration cluster's own chip (planner/published.py) is one more of these.
Accelerator = ChipFacts
ACCELERATORS: dict[str, Accelerator] = CHIPS
# Instance family -> accelerator, derived from the catalogue.
ACCELERATOR_BY_FAMILY: dict[str, str] = {
    facts.family: facts.chip.name for facts in INSTANCE_TYPES.values() if facts.chip is not None
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

    @property
    def timed(self) -> bool:
        """Whether the planner can time a step here: not on a node without a rate (the local CPU cluster's)."""
        return self.peak_flops_per_device > 0


# The local cluster's node as the planner sees it: one device, the node's memory, no rate and no price.
LOCAL_HARDWARE = Hardware(
    instance=dataclasses.replace(
        LOCAL_INSTANCE, accelerators_per_node=1, accelerator_memory_gib=LOCAL_INSTANCE.memory_gib
    ),
    accelerator=Accelerator("CPU", "CPU", hbm_bytes_per_s=0.0, local_link_bytes_per_s=0.0),
    label=LOCAL_INSTANCE.name,
)


def _local_hardware(network_gbps: float | None, usd_per_hour: float | None) -> Hardware:
    where = f"the local CPU cluster ({LOCAL_INSTANCE.name})"
    if usd_per_hour is not None:
        raise HardwareError(f"--price-per-hour: {usd_per_hour!r}: {where} is not priced")
    if network_gbps is not None:
        raise HardwareError(f"network_gbps: {network_gbps!r}: {where} has no network the planner models")
    return LOCAL_HARDWARE


def hardware(
    instance_type: str, *, network_gbps: float | None = None, usd_per_hour: float | None = None, label: str = ""
) -> Hardware:
    """Hardware for an instance type from spec.platform.instances, optionally with another network or price;
    "local-cpu" is the local CPU cluster's node (LOCAL_HARDWARE)."""
    if instance_type == LOCAL_INSTANCE.name:
        return _local_hardware(network_gbps, usd_per_hour)
    try:
        facts = instance_facts(instance_type)
    except KeyError as error:
        raise HardwareError(f"--instance: {error}") from None
    chip = facts.chip
    if chip is None:
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
    return Hardware(facts, chip, label or instance_type)
