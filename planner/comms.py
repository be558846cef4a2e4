"""Collective time from bytes and links: NCCL's ring and tree algorithms over NVLink inside a node and the
network (EFA / InfiniBand) across nodes.

Bandwidth. An all-gather or reduce-scatter of a tensor of S bytes (the full, unsharded size) over a group that
spans n nodes with k members on each moves S (n-1)/n bytes through each node's network interfaces and S (k-1)/k
through each device's NVLink/NeuronLink. NCCL runs one ring per channel and every ring crosses each node
boundary once, so the node's network carries the same bytes whichever rank sits at the boundary; the network and
local stages pipeline, so the slower one sets the time. All-reduce is a reduce-scatter plus an all-gather (twice
the bytes). When several groups of one kind run at once (every TP rank has its own DP group, every shard index of
HSDP its own replica group) they share the node's network, so their bytes add up.

Latency. A ring takes n - 1 network steps per pass (plus k - 1 local ones); NCCL's double binary tree, which it
offers for all-reduce only, takes 2 log2(n) network steps (each node sends and receives the whole tensor once per
phase, the ring's 2 (n-1)/n within 1/n) but NCCL's tuner rates its bandwidth below the ring's (TREE_BANDWIDTH_SHARE).
NCCL picks whichever is faster, so small all-reduces over many nodes go as trees and large ones as rings.
Gathers and reduce-scatters are always rings.

Buckets. A tensor sent as b buckets (DDP's 25 MB gradient buckets, FSDP's one unit per transformer block) pays the
latency b times; the bytes are the same.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from planner.calibration import (
    LOCAL_HOP_LATENCY_S,
    LOCAL_LINK_EFFICIENCY,
    NETWORK_HOP_LATENCY_S,
    TREE_BANDWIDTH_SHARE,
    Efficiency,
)
from planner.hardware import Hardware

Collective = Literal["all_gather", "reduce_scatter", "all_reduce"]


@dataclass(frozen=True)
class Group:
    size: int  # ranks in the collective
    per_node: int  # members of the group on one node
    concurrent_per_node: int = 1  # groups of this kind sharing one node's network at the same time

    @property
    def nodes(self) -> int:
        return math.ceil(self.size / max(1, self.per_node))


def network_seconds(payload_bytes: float, hw: Hardware, efficiency: Efficiency) -> float:
    return payload_bytes / (hw.network_bytes_per_s_per_node * efficiency.network_efficiency)


def local_seconds(payload_bytes: float, hw: Hardware) -> float:
    return payload_bytes / (hw.local_link_bytes_per_s_per_device * LOCAL_LINK_EFFICIENCY)


@dataclass(frozen=True)
class Transfer:
    """Time of a communication and the bytes it puts on each link kind (for the report)."""

    seconds: float = 0.0
    network_bytes_per_node: float = 0.0
    local_bytes_per_device: float = 0.0
    algorithm: str = ""  # "ring" or "tree" for one collective; empty for sums and point-to-point sends

    def __add__(self, other: Transfer) -> Transfer:
        return Transfer(
            self.seconds + other.seconds,
            self.network_bytes_per_node + other.network_bytes_per_node,
            self.local_bytes_per_device + other.local_bytes_per_device,
        )

    def times(self, count: float) -> Transfer:
        return Transfer(self.seconds * count, self.network_bytes_per_node * count, self.local_bytes_per_device * count)


def _network_latency(kind: Collective, nodes: int, algorithm: str) -> float:
    if nodes <= 1:
        return 0.0
    if algorithm == "tree":  # reduce up the tree, broadcast down
        return 2 * math.ceil(math.log2(nodes)) * NETWORK_HOP_LATENCY_S
    passes = 2 if kind == "all_reduce" else 1
    return passes * (nodes - 1) * NETWORK_HOP_LATENCY_S


def collective(
    kind: Collective,
    tensor_bytes: float,
    group: Group,
    hw: Hardware,
    efficiency: Efficiency,
    buckets: int = 1,
) -> Transfer:
    """One collective over `tensor_bytes` (the unsharded size) within `group`, sent as `buckets` pieces."""
    if group.size <= 1 or tensor_bytes <= 0:
        return Transfer()
    passes = 2 if kind == "all_reduce" else 1
    nodes, local = group.nodes, min(group.per_node, group.size)
    network_bytes = local_bytes = 0.0
    network_s = local_s = 0.0
    if nodes > 1:
        network_bytes = passes * group.concurrent_per_node * tensor_bytes * (nodes - 1) / nodes
        network_s = network_seconds(network_bytes, hw, efficiency)
    if local > 1:
        local_bytes = passes * tensor_bytes * (local - 1) / local
        local_s = local_seconds(local_bytes, hw)
    local_latency = passes * (local - 1) * LOCAL_HOP_LATENCY_S if local > 1 else 0.0

    def total(algorithm: str) -> float:
        latency = _network_latency(kind, nodes, algorithm) + local_latency
        network = network_s / TREE_BANDWIDTH_SHARE if algorithm == "tree" else network_s
        return max(network, local_s) + buckets * latency

    algorithm = "ring"
    if kind == "all_reduce" and nodes > 2 and total("tree") < total("ring"):
        algorithm = "tree"
    return Transfer(total(algorithm), network_bytes, local_bytes, algorithm)


def point_to_point(
    payload_bytes: float, hw: Hardware, efficiency: Efficiency, across_nodes: bool, senders_per_node: int
) -> Transfer:
    """One send between pipeline stages; across nodes, the node's senders share its network."""
    if payload_bytes <= 0:
        return Transfer()
    if across_nodes:
        node_bytes = payload_bytes * senders_per_node
        return Transfer(network_seconds(node_bytes, hw, efficiency) + NETWORK_HOP_LATENCY_S, node_bytes, 0.0)
    return Transfer(local_seconds(payload_bytes, hw) + LOCAL_HOP_LATENCY_S, 0.0, payload_bytes)
