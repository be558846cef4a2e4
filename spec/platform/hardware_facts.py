"""The shapes of the hardware catalogue's entries (spec/platform/instances.py holds the entries themselves).

Each fact has one reader or more: the spec's validators, the planner (planner/hardware.py, planner/calibration.py),
the fabric check (cluster/fabric/thresholds.py), the job environment (slurm/netenv.py), ParallelCluster's Slurm
names (cluster/slurm_names.py) and the trainer's MFU (training/metrics/flops.py). None of them keeps a per-instance
table of its own; tests/spec/platform/test_catalogue.py fails when an accelerated entry lacks a fact one of them needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Accelerator = Literal["gpu", "neuron", "none"]
NeuronStack = Literal["nxdt", "torchneuron"]


@dataclass(frozen=True)
class GpuFacts:
    device_name: str  # exactly as torch.cuda.get_device_name() / nvidia-smi report it
    label: str
    peak_bf16_flops: float  # dense, FLOP/s
    memory_gib: float
    peak_fp8_flops: float | None = None  # dense, FLOP/s; None: no FP8 tensor cores or no cited figure
    compute_capability: tuple[int, int] = (0, 0)  # CUDA's sm_XY: what a container's torch must be built for
    # EC2 DescribeInstanceTypes' GpuInfo.Gpus[].Name: ParallelCluster's GRES type is it lower-cased without spaces
    # (cluster/slurm_naming.json, fact gres_type). None for GPUs no instance type here carries.
    ec2_gpu_name: str | None = None


@dataclass(frozen=True)
class ChipFacts:
    """One accelerator chip as the planner and the fabric check see it (planner.hardware calls it Accelerator)."""

    name: str  # the planner's name for it, printed in plans ("H100", "A100-40GB", "Trainium1")
    compute_die: str  # chips that share a matmul efficiency parameter (H200 is an H100 die with more HBM)
    hbm_bytes_per_s: float  # per chip
    local_link_bytes_per_s: float  # NVLink / NeuronLink, per chip, one direction
    # A die no published table is fitted on yet borrows a fitted die's matmul fraction (planner/calibration.py).
    matmul_fraction_of: str | None = None
    source: str = ""  # where the bandwidths come from
    # Trainium: the training stack Neuron supports on it (spec/platform/neuron.py says why each); None for GPUs.
    neuron_stack: NeuronStack | None = None


@dataclass(frozen=True)
class PublishedBaseline:
    """A published nccl-tests all_reduce_perf busbw at 16 GiB on two nodes: the fabric check's reference."""

    busbw_gb_per_s: float
    source: str


@dataclass(frozen=True)
class InstanceFacts:
    name: str
    accelerator: Accelerator
    accelerators_per_node: int
    accelerator_memory_gib: float  # per accelerator (GPU or Trainium chip)
    efa_interfaces: int
    network_gbps: float
    peak_bf16_flops_per_accelerator: float  # dense, FLOP/s
    on_demand_usd_per_hour: float
    vcpus: int
    memory_gib: float
    # NeuronCores per Trainium chip (trn1: 2; trn2: 4 logical cores at LNC=2); 1 for GPUs. One worker per core.
    cores_per_accelerator: int = 1
    gpu_device: str | None = None  # the GPUS entry of a GPU instance's accelerator
    peak_fp8_flops_per_accelerator: float | None = None  # dense, FLOP/s; None where GPUS gives none
    chip: ChipFacts | None = None  # the accelerator's bandwidths and compute die; None on CPU types
    # The fabric check's floor is 80 % of this where one is published, else a share of the line rate.
    published_busbw: PublishedBaseline | None = None
    # The oldest aws-ofi-nccl that drives this type's EFA at its rate; None where older ones only need extra
    # variables (slurm/netenv.py sets them).
    min_aws_ofi_nccl: tuple[int, int, int] | None = None

    @property
    def workers_per_node(self) -> int:
        """Processes a training launcher starts per node: one per GPU, or one per NeuronCore."""
        return self.accelerators_per_node * self.cores_per_accelerator

    @property
    def peak_bf16_flops_per_node(self) -> float:
        return self.accelerators_per_node * self.peak_bf16_flops_per_accelerator

    @property
    def efa_capable(self) -> bool:
        return self.efa_interfaces > 0

    @property
    def family(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def nvlink_gb_per_s_per_gpu(self) -> float | None:
        """One GPU's NVLink bandwidth in one direction (GB/s); None on Trainium and CPU types."""
        if self.accelerator != "gpu" or self.chip is None:
            return None
        return self.chip.local_link_bytes_per_s / 1e9
