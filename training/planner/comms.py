"""Collective time from bytes and links: a bandwidth model of hierarchical ring collectives.

A collective over a group of ranks spread across nodes moves, for all-gather or reduce-scatter of a tensor of S
bytes (the full, unsharded size), S (n-1)/n bytes through each node's network interfaces (n: nodes the group
spans) and S (k-1)/k through each device's NVLink/NeuronLink (k: members on one node). The two stages pipeline,
so the slower one sets the time. All-reduce is a reduce-scatter plus an all-gather. When several groups of the
same kind run at once (every TP rank has its own DP group), they share the node's network, so their bytes add up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from training.planner.calibration import (
    LOCAL_HOP_LATENCY_S,
    LOCAL_LINK_EFFICIENCY,
    NETWORK_HOP_LATENCY_S,
    Efficiency,
)
from training.planner.hardware import Hardware

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

    def __add__(self, other: Transfer) -> Transfer:
        return Transfer(
            self.seconds + other.seconds,
            self.network_bytes_per_node + other.network_bytes_per_node,
            self.local_bytes_per_device + other.local_bytes_per_device,
        )

    def times(self, count: float) -> Transfer:
        return Transfer(self.seconds * count, self.network_bytes_per_node * count, self.local_bytes_per_device * count)


def collective(kind: Collective, tensor_bytes: float, group: Group, hw: Hardware, efficiency: Efficiency) -> Transfer:
    """One collective over `tensor_bytes` (the unsharded size) within `group`."""
    if group.size <= 1 or tensor_bytes <= 0:
        return Transfer()
    passes = 2 if kind == "all_reduce" else 1
    nodes, local = group.nodes, min(group.per_node, group.size)
    inter = network_bytes = 0.0
    if nodes > 1:
        network_bytes = passes * group.concurrent_per_node * tensor_bytes * (nodes - 1) / nodes
        inter = network_seconds(network_bytes, hw, efficiency) + passes * (nodes - 1) * NETWORK_HOP_LATENCY_S
    intra = local_bytes = 0.0
    if local > 1:
        local_bytes = passes * tensor_bytes * (local - 1) / local
        intra = local_seconds(local_bytes, hw) + passes * (local - 1) * LOCAL_HOP_LATENCY_S
    return Transfer(max(inter, intra), network_bytes, local_bytes)


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
