"""What a healthy fabric must deliver: the bus-bandwidth floor and the EFA bytes an all-reduce cannot avoid.

Where a published nccl-tests baseline exists for the instance type (the catalogue's published_busbw,
spec/platform/instances.py, with its source), the floor is 80 % of it: the all_reduce_perf busbw at 16 GiB on two
nodes (p5.48xlarge about 487 GB/s, p4de.24xlarge about 78 GB/s). Those exceed what the line rate alone predicts,
because NCCL's NVLS and tree algorithms send fewer bytes between nodes than a ring; a line-rate floor would pass a
run that lost a third of its bandwidth. More nodes lower busbw a little (longer rings, more latency); the 20 %
margin covers the sizes this check runs (2 to 16 nodes).

For the types without a published baseline the rule is physical. In a ring all-reduce over N nodes every node sends and
receives 2(N-1)/N times the buffer through its network cards, and nccl-tests (and nccom-test, which copies its
definition) scale the measured rate by the same 2(N-1)/N to get "bus bandwidth". The factors cancel: across nodes,
large-message busbw can at best equal the node's EFA bandwidth in bytes per second, for any N >= 2. A check then
asks for a fraction F of that ceiling:

- GPU (NCCL + aws-ofi-nccl): F = 0.70. Packet headers, SRD's acknowledgements and the ring's step
  synchronisation cost some of the line rate even when all is well; a run below 70 % means a fault (a rail
  down, GPUDirect RDMA off so data bounces through host memory, a wrong NCCL/libfabric setting, TCP sockets).
- Trainium (Neuron collectives): F = 0.40. The Neuron guide's own two-instance all-reduce example reaches
  about half of trn1.32xlarge's 800 Gbps at 1 GiB, so a floor at 40 % passes a healthy pair and still fails
  a broken path, which loses far more than that.

Both can be overridden (--min-fraction, a share of the line rate) once a site knows what its clusters reach.

One GPU node (--nodes 1) checks NVLink instead: all eight GPUs all-reduce through NVSwitch, and busbw must reach
60 % of one GPU's NVLink bandwidth in one direction (the catalogue's chip figure: A100 300 GB/s, H100 and H200
450 GB/s, B200 and B300 900 GB/s). Types with no published baseline take the line-rate rule. A healthy node
reaches 75 % or more (NVLS on H100 more still); a GPU with NVLink errors or a link down falls far below.
--min-fraction then is a share of that NVLink bandwidth.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from spec.errors import UserError
from spec.platform.instances import INSTANCE_TYPES, InstanceFacts, PublishedBaseline

MIN_FRACTION_BY_ACCELERATOR: dict[str, float] = {"gpu": 0.70, "neuron": 0.40}
GIB = 1 << 30
BASELINE_FRACTION = 0.80
NVLINK_FRACTION = 0.60
# One GPU's NVLink bandwidth in one direction (GB/s), per GPU type of the catalogue.
NVLINK_GB_PER_S_PER_GPU: dict[str, float] = {
    name: nvlink for name, facts in INSTANCE_TYPES.items() if (nvlink := facts.nvlink_gb_per_s_per_gpu) is not None
}
PUBLISHED_BUSBW_16GIB: dict[str, PublishedBaseline] = {
    name: facts.published_busbw for name, facts in INSTANCE_TYPES.items() if facts.published_busbw is not None
}


class FabricError(UserError):
    """Bad input to the fabric check; str() is one line naming the argument and the value."""


@dataclass(frozen=True)
class BusbwThreshold:
    instance: InstanceFacts
    nodes: int
    fraction: float
    baseline: PublishedBaseline | None = None  # the floor is fraction x baseline when set, else x line rate
    nvlink_gb_per_s: float | None = None  # one node: the floor is fraction x one GPU's NVLink bandwidth

    @property
    def intra_node(self) -> bool:
        return self.nvlink_gb_per_s is not None

    @property
    def line_rate_gbps(self) -> float:
        """The node's rated network bandwidth in Gbit/s (all EFA interfaces together)."""
        return self.instance.network_gbps

    @property
    def ceiling_gb_per_s(self) -> float:
        """Ring all-reduce busbw across nodes cannot exceed the node's bandwidth in bytes: Gbit/s / 8."""
        return self.line_rate_gbps / 8

    @property
    def min_busbw_gb_per_s(self) -> float:
        if self.nvlink_gb_per_s is not None:
            return self.fraction * self.nvlink_gb_per_s
        if self.baseline is not None:
            return self.fraction * self.baseline.busbw_gb_per_s
        return self.fraction * self.ceiling_gb_per_s

    def describe(self) -> str:
        """'2 x p5.48xlarge (80 % of the published 487 GB/s)' or '2 x p5en.48xlarge (70 % of 3200 Gbps)'"""
        if self.nvlink_gb_per_s is not None:
            return (
                f"1 x {self.instance.name} over NVLink ({self.fraction * 100:.0f} % of {self.nvlink_gb_per_s:.0f} GB/s "
                "per GPU)"
            )
        if self.baseline is not None:
            reference = f"the published {self.baseline.busbw_gb_per_s:.0f} GB/s"
        else:
            reference = f"{self.line_rate_gbps:.0f} Gbps"
        return f"{self.nodes} x {self.instance.name} ({self.fraction * 100:.0f} % of {reference})"


def check_nodes(nodes: int, single_node: bool = False) -> None:
    """At least 2 nodes (EFA between them); 1 where the instance's NVLink is checked on its own."""
    if nodes < 1 or (nodes == 1 and not single_node):
        raise FabricError(f"--nodes: {nodes} must be at least 2 (the check measures traffic between nodes over EFA)")


def busbw_threshold(instance: InstanceFacts, nodes: int, fraction: float | None = None) -> BusbwThreshold:
    """The floor for large-message all-reduce busbw on `nodes` nodes of `instance` (one GPU node: NVLink)."""
    nvlink = instance.nvlink_gb_per_s_per_gpu
    check_nodes(nodes, single_node=nvlink is not None)
    if instance.accelerator not in MIN_FRACTION_BY_ACCELERATOR:
        raise FabricError(f"--instance-type: {instance.name} has no accelerators; the fabric check needs GPU or trn1")
    if not instance.efa_capable:
        raise FabricError(f"--instance-type: {instance.name} has no EFA interfaces")
    if fraction is not None and not 0 < fraction <= 1:
        raise FabricError(f"--min-fraction: {fraction} must be above 0 and at most 1")
    if nodes == 1 and nvlink is not None:
        return BusbwThreshold(instance, 1, fraction or NVLINK_FRACTION, nvlink_gb_per_s=nvlink)
    if fraction is not None:
        return BusbwThreshold(instance, nodes, fraction)
    if instance.published_busbw is not None:
        return BusbwThreshold(instance, nodes, BASELINE_FRACTION, instance.published_busbw)
    return BusbwThreshold(instance, nodes, MIN_FRACTION_BY_ACCELERATOR[instance.accelerator])


def min_cross_node_bytes(sizes: Iterable[int], nodes: int, operations_per_size: int) -> int:
    """Bytes each node must send (and receive) over the network for these all-reduces, at the very least.

    Every node's share of the result needs the other nodes' data for it, so a node sends at least (N-1)/N of its
    buffer per operation: the reduce-scatter half alone, which no real algorithm undercuts (ring and tree send
    more). Warm-up and validation runs are not counted, so the bound stays below what a healthy run moves.
    """
    check_nodes(nodes, single_node=True)
    return sum(size * (nodes - 1) // nodes for size in sizes) * operations_per_size
