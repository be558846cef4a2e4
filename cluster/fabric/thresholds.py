"""What a healthy fabric must deliver: the bus-bandwidth floor and the EFA bytes an all-reduce cannot avoid.

The rule is physical, not a table of numbers per type. In a ring all-reduce over N nodes every node sends and
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

Both can be overridden (--min-fraction) once a site knows what its clusters reach.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from cluster.instances import InstanceFacts

MIN_FRACTION_BY_ACCELERATOR: dict[str, float] = {"gpu": 0.70, "neuron": 0.40}
GIB = 1 << 30


class FabricError(ValueError):
    """Bad input to the fabric check; str() is one line naming the argument and the value."""


@dataclass(frozen=True)
class BusbwThreshold:
    instance: InstanceFacts
    nodes: int
    fraction: float

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
        return self.fraction * self.ceiling_gb_per_s

    def describe(self) -> str:
        """'2 x p5.48xlarge (70 % of 3200 Gbps)'"""
        return f"{self.nodes} x {self.instance.name} ({self.fraction * 100:.0f} % of {self.line_rate_gbps:.0f} Gbps)"


def check_nodes(nodes: int) -> None:
    if nodes < 2:
        raise FabricError(f"--nodes: {nodes} must be at least 2 (the check measures traffic between nodes over EFA)")


def busbw_threshold(instance: InstanceFacts, nodes: int, fraction: float | None = None) -> BusbwThreshold:
    """The floor for large-message all-reduce busbw on `nodes` nodes of `instance`."""
    check_nodes(nodes)
    if instance.accelerator not in MIN_FRACTION_BY_ACCELERATOR:
        raise FabricError(f"--instance-type: {instance.name} has no accelerators; the fabric check needs GPU or trn1")
    if not instance.efa_capable:
        raise FabricError(f"--instance-type: {instance.name} has no EFA interfaces")
    if fraction is None:
        fraction = MIN_FRACTION_BY_ACCELERATOR[instance.accelerator]
    elif not 0 < fraction <= 1:
        raise FabricError(f"--min-fraction: {fraction} must be above 0 and at most 1")
    return BusbwThreshold(instance, nodes, fraction)


def min_cross_node_bytes(sizes: Iterable[int], nodes: int, operations_per_size: int) -> int:
    """Bytes each node must send (and receive) over the network for these all-reduces, at the very least.

    Every node's share of the result needs the other nodes' data for it, so a node sends at least (N-1)/N of its
    buffer per operation: the reduce-scatter half alone, which no real algorithm undercuts (ring and tree send
    more). Warm-up and validation runs are not counted, so the bound stays below what a healthy run moves.
    """
    check_nodes(nodes)
    return sum(size * (nodes - 1) // nodes for size in sizes) * operations_per_size
