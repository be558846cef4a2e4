"""The planner's free parameters (fitted on the published tables by `python -m planner.fit`) and its
fixed constants (vendor figures or byte counts, not fitted). docs/planner.md explains each one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spec.platform.instances import CHIPS


def fitted_die(die: str) -> str:
    """The die whose fitted matmul fraction `die` uses: itself, or for a die no published table is fitted on yet the
    fitted die the catalogue names (spec.platform.instances.CHIPS, matmul_fraction_of), assumed, not fitted."""
    for chip in CHIPS.values():
        if chip.compute_die == die and chip.matmul_fraction_of is not None:
            return chip.matmul_fraction_of
    return die


@dataclass(frozen=True)
class Efficiency:
    """Free parameters. Each is a physical rate of one software stack on one chip, so it carries to configurations no
    table covers; each backend's come from sources about that stack (planner/published.py tags every row)."""

    # Fraction of dense bf16 peak that large matmuls reach, per backend and compute die ("backend.die").
    matmul_fraction: dict[str, float] = field(
        default_factory=lambda: {
            "fsdp.A100": 0.799, "fsdp.H100": 0.541, "nemo.A100": 0.706, "nemo.H100": 0.544, "neuron.Trainium1": 0.639,
        }
    )  # fmt: skip
    # Bytes of memory-bound (elementwise) HBM traffic per token, per layer, per hidden unit, forward + backward:
    # norms, residual adds, activation functions, rotary, casts. Divided by HBM bandwidth, it is the part of a
    # layer's time that does not shrink with peak FLOP/s, which is why small hidden sizes and H100s (3x the FLOP/s
    # of an A100, 1.6x the bandwidth) fall short of peak. Per kernel set (job.Kernels): PyTorch eager, torch.compile,
    # Megatron Core / TransformerEngine's fused kernels (Neuron: eager's, see job.Kernels).
    elementwise_bytes_per_hidden: dict[str, float] = field(
        default_factory=lambda: {"eager": 495.292, "compiled": 176.08, "fused": 265.517}
    )
    # Fraction of inter-node line rate (EFA or InfiniBand) that collectives reach.
    network_efficiency: float = 0.9
    # Fraction of the linear layers' time that tensor-parallel collectives hide behind where the stack pipelines them
    # with the GEMMs (Software.tp_overlap: TransformerEngine's userbuffers, AsyncTP).
    tp_overlap_fraction: float = 0.963
    # Fraction of compute time that data-parallel collectives hide behind, per backend: how well the stack schedules
    # them (FSDP's prefetch and DDP's buckets; Megatron's bucketed, overlapped distributed optimizer). Neuron jobs run
    # without overlap (Software.dp_overlap) and take fsdp's value if asked for it.
    overlap_fraction: dict[str, float] = field(default_factory=lambda: {"fsdp": 0.329, "nemo": 1.0})

    def matmul(self, backend: str, die: str) -> float:
        return self.matmul_fraction[f"{backend}.{fitted_die(die)}"]

    def overlap(self, backend: str) -> float:
        return self.overlap_fraction.get(backend, self.overlap_fraction["fsdp"])

    def replace(self, **changes: float) -> Efficiency:
        values: dict[str, object] = {
            "matmul_fraction": dict(self.matmul_fraction),
            "elementwise_bytes_per_hidden": dict(self.elementwise_bytes_per_hidden),
            "network_efficiency": self.network_efficiency,
            "tp_overlap_fraction": self.tp_overlap_fraction,
            "overlap_fraction": dict(self.overlap_fraction),
        }
        for name, value in changes.items():
            field_name, _, key = name.partition(".")
            if key:
                values[field_name][key] = value  # type: ignore[index]
            else:
                values[name] = value
        return Efficiency(**values)  # type: ignore[arg-type]

    def as_flat_dict(self) -> dict[str, float]:
        flat = {f"matmul_fraction.{key}": value for key, value in self.matmul_fraction.items()}
        flat |= {f"elementwise_bytes_per_hidden.{key}": v for key, v in self.elementwise_bytes_per_hidden.items()}
        flat["network_efficiency"] = self.network_efficiency
        flat["tp_overlap_fraction"] = self.tp_overlap_fraction
        flat |= {f"overlap_fraction.{key}": value for key, value in self.overlap_fraction.items()}
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
# Megatron Core's default gradient bucket: max(40M, 1M x data-parallel size) parameters
# (megatron/core/distributed/distributed_data_parallel_config.py, bucket_size).
MEGATRON_BUCKET_PARAMS = 40_000_000
MEGATRON_BUCKET_PARAMS_PER_DP_RANK = 1_000_000
# Materialized attention (unfused softmax, dropout): bytes through HBM per score element. Forward: write the
# scores, softmax read+write, dropout read+write and its mask, read for P.V (about 13 bytes); backward about twice.
MATERIALIZED_SCORE_BYTES_FORWARD = 13.0
MATERIALIZED_SCORE_BYTES_BACKWARD = 26.0
# AdamW step: read fp32 master, m, v and the gradient, write master, m, v and the bf16 copy (bytes per parameter).
OPTIMIZER_BYTES_PER_PARAM = 4 * 4 + 3 * 4 + 2
# torchao's float8 training (the fsdp backend's fp8; TransformerEngine fuses its casts into neighbouring kernels and
# is charged nothing here): every cast of a bf16 tensor to e4m3 with a dynamic scale is an amax pass (read 2 bytes per
# element) and a cast pass (read 2, write 1), two kernels because the tensorwise scale is the whole tensor's amax.
# torchao 0.18 (float8/float8_linear.py) saves the bf16 input and weight for backward and casts six times per linear
# layer and micro-batch: forward the input and the weight; backward the grad-output twice (row-major for the grad-input
# GEMM, column-major for the grad-weight GEMM), the weight again and the input again (transposed for the grad-weight
# GEMM). So each element of a linear's input, output gradient and weight is cast twice per micro-batch.
# The rowwise recipe casts the same six: the four along the contiguous dimension take one pass (3 bytes, the row's
# amax fits on chip), the two along the other dimension two passes; fewer bytes than tensorwise, yet it measures
# slower (its GEMMs apply a scale per row and column): the planner times both as tensorwise (docs/planner.md).
TORCHAO_CAST_BYTES_PER_ELEMENT = 2 + 2 + 1
TORCHAO_CASTS_PER_ELEMENT = 2
# Memory: what the allocator, CUDA/Neuron runtime and collective buffers take beyond the tensors counted.
RUNTIME_RESERVED_GIB = 2.0
FRAGMENTATION_FRACTION = 0.10

CALIBRATED = Efficiency()
