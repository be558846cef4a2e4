"""The planner's free parameters (fitted on the published tables by `python -m planner.fit`) and its
fixed constants (vendor figures or byte counts, not fitted). docs/planner.md explains each one.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Efficiency:
    """Free parameters. Each is a physical rate, so it carries to configurations no table covers."""

    # Fraction of dense bf16 peak that large matmuls reach, per compute die. Blackwell and Trainium2 have no
    # published table here to fit on: they carry Hopper's and Trainium1's fitted values, assumed, not fitted.
    matmul_fraction: dict[str, float] = field(
        default_factory=lambda: {
            "A100": 0.753, "H100": 0.498, "Trainium1": 0.601, "Blackwell": 0.498, "Trainium2": 0.601,
        }
    )  # fmt: skip
    # Bytes of memory-bound (elementwise) HBM traffic per token, per layer, per hidden unit, forward + backward:
    # norms, residual adds, activation functions, rotary, casts. Divided by HBM bandwidth, it is the part of a
    # layer's time that does not shrink with peak FLOP/s, which is why small hidden sizes and H100s (3x the FLOP/s
    # of an A100, 1.6x the bandwidth) fall short of peak.
    elementwise_bytes_per_hidden: float = 306.743
    # Fraction of inter-node line rate (EFA or InfiniBand) that collectives reach.
    network_efficiency: float = 0.747
    # Fraction of compute time that data-parallel collectives can hide behind (FSDP prefetch, DDP buckets).
    overlap_fraction: float = 0.458

    def replace(self, **changes: float) -> Efficiency:
        values = {
            "matmul_fraction": dict(self.matmul_fraction),
            "elementwise_bytes_per_hidden": self.elementwise_bytes_per_hidden,
            "network_efficiency": self.network_efficiency,
            "overlap_fraction": self.overlap_fraction,
        }
        for name, value in changes.items():
            if name.startswith("matmul_fraction."):
                values["matmul_fraction"][name.split(".", 1)[1]] = value  # type: ignore[index]
            else:
                values[name] = value
        return Efficiency(**values)  # type: ignore[arg-type]

    def as_flat_dict(self) -> dict[str, float]:
        flat = {f"matmul_fraction.{die}": value for die, value in self.matmul_fraction.items()}
        flat["elementwise_bytes_per_hidden"] = self.elementwise_bytes_per_hidden
        flat["network_efficiency"] = self.network_efficiency
        flat["overlap_fraction"] = self.overlap_fraction
        return flat


# Fixed constants (not fitted).
LOCAL_LINK_EFFICIENCY = 0.8  # NVLink/NeuronLink collectives reach about 80 % of the link's line rate
NETWORK_HOP_LATENCY_S = 15e-6  # per ring step across nodes (EFA/InfiniBand), seconds
LOCAL_HOP_LATENCY_S = 5e-6  # per ring step inside a node
# NCCL's tree all-reduce reaches less network bandwidth than its ring (its tuner scales tree bandwidth down), so it
# wins only where latency dominates: small tensors over many nodes.
TREE_BANDWIDTH_SHARE = 0.85
# torch DDP's default gradient bucket (bucket_cap_mb=25); each bucket pays the all-reduce latency, and the last one
# cannot hide behind backward. FSDP's unit is one transformer block instead.
DDP_BUCKET_BYTES = 25 * 2**20
# Materialized attention (unfused softmax, dropout): bytes through HBM per score element. Forward: write the
# scores, softmax read+write, dropout read+write and its mask, read for P.V (about 13 bytes); backward about twice.
MATERIALIZED_SCORE_BYTES_FORWARD = 13.0
MATERIALIZED_SCORE_BYTES_BACKWARD = 26.0
# AdamW step: read fp32 master, m, v and the gradient, write master, m, v and the bf16 copy (bytes per parameter).
OPTIMIZER_BYTES_PER_PARAM = 4 * 4 + 3 * 4 + 2
# Memory: what the allocator, CUDA/Neuron runtime and collective buffers take beyond the tensors counted.
RUNTIME_RESERVED_GIB = 2.0
FRAGMENTATION_FRACTION = 0.10

CALIBRATED = Efficiency()
