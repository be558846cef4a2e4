"""The hardware catalogue: every fact about the EC2 instance types this repo deploys, in one place.

Accelerators, memory, peak rates, HBM and NVLink/NeuronLink bandwidths, the planner's compute die, EFA, network,
the fabric check's published baselines, the aws-ofi-nccl floor, the EC2 GPU name behind ParallelCluster's Slurm
GRES, prices and their sources. The cluster builder, the validators, the local SLURM cluster, the planner, the
fabric check, the job environment and the trainer's MFU all read it and keep no per-instance table of their own:
adding an instance type is one entry here (plus its chip in GPUS and CHIPS if new) and its tests;
tests/spec/platform/test_catalogue.py fails when an accelerated entry lacks a fact a reader needs
(docs/extending.md). The entries' shapes are in spec/platform/hardware_facts.py. Figures are published ones:

- peak bf16 FLOP/s are dense (no 2:4 sparsity), per GPU in GPUS by the exact name CUDA reports (H100 SXM 989 T,
  PCIe 756 T, NVL 835 T; A100 312 T; H200 989 T; B200 2250 T; A10G 70 T, not the A10's 125 T), and Trainium1
  190 T per chip (a trn1.32xlarge has 16 chips, 32 NeuronCores, 3.04 PFLOP/s bf16). The trainer's MFU and the
  planner both read them here. Peak FP8 FLOP/s are dense too, and only where the vendor's data sheet gives one
  (H100 SXM and H200 SXM 1979 T, H100 PCIe 1513 T, H100 NVL and H200 NVL 1671 T, B200 4500 T: half the "with
  sparsity" figures); A100 has no FP8 tensor cores, and Trainium1's FP8 rate is not cited above its bf16 rate
  here, so neither has one.
- EFA interfaces count one per network card (p4d/p4de 4, p5/p5e 32, p5en 16, trn1 8, trn1n 16, p6-b200 8,
  p6-b300 16: its card 0 is ENA only, cards 1-16 carry EFA, which ParallelCluster 3.16.1 handles itself,
  pcluster/constants.py INSTANCE_TYPES_WITH_FIRST_INTERFACE_ENA; trn2 16).
- Blackwell: p6-b200.48xlarge and p6-b300.48xlarge from the EC2 P6 page,
  https://aws.amazon.com/ec2/instance-types/p6/ (8 GPUs; B200 1,440 GB HBM3e in all, B300 2,144 GB; 192 vCPUs;
  2 TiB and 4 TiB host memory; 8 x 400 and 16 x 400 Gbps EFAv4), the peaks from NVIDIA's HGX page,
  https://www.nvidia.com/en-us/data-center/hgx/ (B200 and B300 alike: 2.25 PFLOP/s dense bf16 and 4.5 dense FP8
  per GPU, half the "with sparsity" figures; B300's gain is FP4, which no trainer here uses). Not read on a
  machine here (no Blackwell GPU was lent): the device name "NVIDIA B300 SXM6 AC" and compute capability 10.3 for
  a p6-b300, 10.0 (CUDA's sm_100) for B200, as public reports give them; a different name only costs the
  peak-by-name lookup, which then asks for --peak-tflops. MXFP8 (Blackwell's block-scaled FP8) runs at the FP8 rate; the planner models FP8 only.
- Trainium2 (trn2.48xlarge), Neuron's trn2 architecture page,
  https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/arch/neuron-hardware/trn2-arch.html:
  16 chips, 96 GiB each, 192 vCPUs, 2 TiB, 10.7 PFLOP/s dense bf16 and 20.8 FP8 per
  instance (667 and 1,300 TFLOP/s per chip), 16 x 200 Gbps EFAv3. A chip has 8 physical NeuronCore-v3s grouped
  by the logical-core setting LNC=2 (Neuron's default on trn2) into 4 workers.
- network_gbps is the instance's rated bandwidth ("up to" figures for the small head-node types).
- on_demand_usd_per_hour is a default only (Linux, us-east-1, rounded; the accelerated types after
  AWS's mid-2025 price reduction). p6-b200 113.93, p6-b300 142.42 (us-west-2) and trn2 44.70 (us-east-2) are
  third-party listings of the EC2 on-demand page (https://aws.amazon.com/ec2/pricing/on-demand/), NOT checked
  against it here: confirm them before planning money on them. Capacity Blocks are priced apart. Prices change:
  the spec's `cluster.prices` overrides them.
"""

from __future__ import annotations

from collections.abc import Mapping

from spec.platform.hardware_facts import Accelerator, ChipFacts, GpuFacts, InstanceFacts, PublishedBaseline

__all__ = [
    "ACCELERATED_TYPES", "CHIPS", "GPUS", "HEAD_NODE_TYPES", "INSTANCE_TYPES", "LOCAL_INSTANCE", "MIN_CUDA",
    "Accelerator", "ChipFacts", "GpuFacts", "InstanceFacts", "PublishedBaseline", "UnknownInstanceType",
    "instance_facts", "on_demand_usd_per_hour",
]  # fmt: skip

_T = 1e12


# The oldest CUDA toolkit with kernels for a compute capability (NVIDIA's CUDA toolkit release notes: 11.0 Ampere
# sm_80, 11.1 sm_86, 11.8 Ada sm_89 and Hopper sm_90, 12.8 Blackwell sm_100, 12.9 Blackwell Ultra sm_103).
MIN_CUDA: dict[tuple[int, int], tuple[int, int]] = {
    (8, 0): (11, 0), (8, 6): (11, 1), (8, 9): (11, 8), (9, 0): (11, 8), (10, 0): (12, 8), (10, 3): (12, 9),
}  # fmt: skip

GPUS: dict[str, GpuFacts] = {
    gpu.device_name: gpu
    for gpu in (
        GpuFacts("NVIDIA A100-SXM4-40GB", "A100 SXM4 40GB", 312 * _T, 40.0, None, (8, 0), "A100"),
        GpuFacts("NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB", 312 * _T, 80.0, None, (8, 0), "A100"),
        GpuFacts("NVIDIA A100-PCIE-40GB", "A100 PCIe 40GB", 312 * _T, 40.0, compute_capability=(8, 0)),
        GpuFacts("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB", 312 * _T, 80.0, compute_capability=(8, 0)),
        GpuFacts("NVIDIA H100 80GB HBM3", "H100 SXM", 989 * _T, 80.0, 1979 * _T, (9, 0), "H100"),
        GpuFacts("NVIDIA H100 PCIe", "H100 PCIe", 756 * _T, 80.0, 1513 * _T, (9, 0)),
        GpuFacts("NVIDIA H100 NVL", "H100 NVL", 835 * _T, 94.0, 1671 * _T, (9, 0)),
        GpuFacts("NVIDIA H200", "H200 SXM", 989 * _T, 141.0, 1979 * _T, (9, 0), "H200"),
        GpuFacts("NVIDIA H200 NVL", "H200 NVL", 835 * _T, 141.0, 1671 * _T, (9, 0)),
        GpuFacts("NVIDIA B200", "B200", 2250 * _T, 180.0, 4500 * _T, (10, 0), "B200"),
        GpuFacts("NVIDIA B300 SXM6 AC", "B300", 2250 * _T, 268.0, 4500 * _T, (10, 3), "B300"),
        GpuFacts("NVIDIA A10G", "A10G", 70 * _T, 24.0, compute_capability=(8, 6)),
        GpuFacts("NVIDIA L4", "L4", 121 * _T, 24.0, compute_capability=(8, 9)),
        GpuFacts("NVIDIA L40S", "L40S", 362 * _T, 48.0, compute_capability=(8, 9)),
    )
}

# The chips behind the accelerated types: HBM and NVLink / NeuronLink bandwidths (per chip; links one way) and the
# compute die the planner's matmul fraction is fitted per. NVLink's figure is also the fabric check's one-node
# reference. A die with no published table fitted yet borrows the nearest fitted die's fraction, assumed, not fitted.
_NVIDIA = "NVIDIA's data sheets (A100, H100/H200 SXM): HBM per GPU; NVLink 3/4 300/450 GB/s per GPU each way"
_HGX = (
    "NVIDIA's HGX page, https://www.nvidia.com/en-us/data-center/hgx/ (read 2026-11-28): HBM3e 8 TB/s per GPU, "
    "NVLink 5 1.8 TB/s per GPU (900 GB/s each way)"
)
_TRN = (
    "Neuron's trn1/trn2 architecture pages: HBM per chip (Trainium1 820 GB/s; Trainium2 46.4 TB/s for 16 chips); "
    "NeuronLink's per-chip rate one way is not published in one place: 384 GB/s (v2) and 640 GB/s (v3) are "
    "assumptions, and Trainium's fitted matmul fraction absorbs an error in them"
)
CHIPS: dict[str, ChipFacts] = {
    chip.name: chip
    for chip in (
        ChipFacts("A100-40GB", "A100", 1.555e12, 300e9, source=_NVIDIA),
        ChipFacts("A100-80GB", "A100", 2.039e12, 300e9, source=_NVIDIA),
        ChipFacts("H100", "H100", 3.35e12, 450e9, source=_NVIDIA),
        ChipFacts("H200", "H100", 4.8e12, 450e9, source=_NVIDIA),
        ChipFacts("B200", "Blackwell", 8e12, 900e9, matmul_fraction_of="H100", source=_HGX),
        ChipFacts("B300", "Blackwell", 8e12, 900e9, matmul_fraction_of="H100", source=_HGX),
        ChipFacts("Trainium1", "Trainium1", 820e9, 384e9, source=_TRN, neuron_stack="nxdt"),
        ChipFacts("Trainium2", "Trainium2", 2.9e12, 640e9, matmul_fraction_of="Trainium1", source=_TRN,
                  neuron_stack="torchneuron"),
    )
}  # fmt: skip

# Published nccl-tests baselines (cluster/fabric/thresholds.py explains the floors built on them).
_BASELINE_SOURCE = "awsome-distributed-training micro-benchmarks/nccl-tests: all_reduce_perf busbw at 16 GiB, 2 nodes"
_P5_BASELINE = PublishedBaseline(487.0, _BASELINE_SOURCE)
_P4DE_BASELINE = PublishedBaseline(78.0, _BASELINE_SOURCE)
# p4d has p4de's network (4 x 100 Gbps EFA) and NVSwitch, so it shares its baseline.
_P4D_BASELINE = PublishedBaseline(78.0, _BASELINE_SOURCE + " (measured on p4de, same network and NVSwitch)")

# aws-ofi-nccl 1.7.3 is p5's floor (3200 Gbps over many EFA devices); it holds for Blackwell's p6 too, which also has a
# tuner of its own in later releases (platform-aws). ParallelCluster 3.16's AMIs ship a release far above both.
_OFI_P5 = (1, 7, 3)


def _gpu(
    name: str, gpus: int, device: str, efa: int, gbps: float, usd: float, vcpus: int, mem: float, *, chip: str,
    min_aws_ofi_nccl: tuple[int, int, int] | None, baseline: PublishedBaseline | None = None,
) -> InstanceFacts:  # fmt: skip
    """A GPU type; the aws-ofi-nccl floor is keyword-only and required, so every GPU entry states one (or None)."""
    gpu = GPUS[device]
    return InstanceFacts(
        name, "gpu", gpus, gpu.memory_gib, efa, gbps, gpu.peak_bf16_flops, usd, vcpus, mem, gpu_device=device,
        peak_fp8_flops_per_accelerator=gpu.peak_fp8_flops, chip=CHIPS[chip], published_busbw=baseline,
        min_aws_ofi_nccl=min_aws_ofi_nccl,
    )  # fmt: skip


def _trainium(name: str, efa: int, gbps: float, usd: float) -> InstanceFacts:
    return InstanceFacts(
        name, "neuron", 16, 32.0, efa, gbps, 190 * _T, usd, 128, 512.0, cores_per_accelerator=2,
        chip=CHIPS["Trainium1"],
    )  # fmt: skip


def _trainium2(name: str, efa: int, gbps: float, usd: float) -> InstanceFacts:
    return InstanceFacts(
        name, "neuron", 16, 96.0, efa, gbps, 10.7e15 / 16, usd, 192, 2048.0, cores_per_accelerator=4,
        peak_fp8_flops_per_accelerator=20.8e15 / 16, chip=CHIPS["Trainium2"],
    )  # fmt: skip


def _cpu(name: str, vcpus: int, mem: float, gbps: float, usd: float) -> InstanceFacts:
    return InstanceFacts(name, "none", 0, 0.0, 0, gbps, 0.0, usd, vcpus, mem)


_ALL: tuple[InstanceFacts, ...] = (
    # training nodes
    _gpu("p4d.24xlarge", 8, "NVIDIA A100-SXM4-40GB", 4, 400, 21.96, 96, 1152, chip="A100-40GB",
         min_aws_ofi_nccl=None, baseline=_P4D_BASELINE),
    _gpu("p4de.24xlarge", 8, "NVIDIA A100-SXM4-80GB", 4, 400, 27.45, 96, 1152, chip="A100-80GB",
         min_aws_ofi_nccl=None, baseline=_P4DE_BASELINE),
    _gpu("p5.48xlarge", 8, "NVIDIA H100 80GB HBM3", 32, 3200, 55.04, 192, 2048, chip="H100",
         min_aws_ofi_nccl=_OFI_P5, baseline=_P5_BASELINE),
    _gpu("p5e.48xlarge", 8, "NVIDIA H200", 32, 3200, 63.30, 192, 2048, chip="H200", min_aws_ofi_nccl=_OFI_P5),
    _gpu("p5en.48xlarge", 8, "NVIDIA H200", 16, 3200, 63.30, 192, 2048, chip="H200", min_aws_ofi_nccl=_OFI_P5),
    _gpu("p6-b200.48xlarge", 8, "NVIDIA B200", 8, 3200, 113.93, 192, 2048, chip="B200", min_aws_ofi_nccl=_OFI_P5),
    _gpu("p6-b300.48xlarge", 8, "NVIDIA B300 SXM6 AC", 16, 6400, 142.42, 192, 4096, chip="B300",
         min_aws_ofi_nccl=_OFI_P5),
    _trainium("trn1.32xlarge", 8, 800, 21.50),
    _trainium("trn1n.32xlarge", 16, 1600, 24.78),
    _trainium2("trn2.48xlarge", 16, 3200, 44.70),
    # head nodes
    _cpu("c5.xlarge", 4, 8, 10, 0.17),
    _cpu("c5.2xlarge", 8, 16, 10, 0.34),
    _cpu("c5.4xlarge", 16, 32, 10, 0.68),
    _cpu("c6i.xlarge", 4, 8, 12.5, 0.17),
    _cpu("c6i.2xlarge", 8, 16, 12.5, 0.34),
    _cpu("c6i.4xlarge", 16, 32, 12.5, 0.68),
    _cpu("c6i.8xlarge", 32, 64, 12.5, 1.36),
    _cpu("m5.xlarge", 4, 16, 10, 0.192),
    _cpu("m5.2xlarge", 8, 32, 10, 0.384),
    _cpu("m5.4xlarge", 16, 64, 10, 0.768),
    _cpu("m5.8xlarge", 32, 128, 10, 1.536),
    _cpu("m6i.xlarge", 4, 16, 12.5, 0.192),
    _cpu("m6i.2xlarge", 8, 32, 12.5, 0.384),
    _cpu("m6i.4xlarge", 16, 64, 12.5, 0.768),
    _cpu("m6i.8xlarge", 32, 128, 12.5, 1.536),
    _cpu("m7i.xlarge", 4, 16, 12.5, 0.2016),
    _cpu("m7i.2xlarge", 8, 32, 12.5, 0.4032),
    _cpu("m7i.4xlarge", 16, 64, 12.5, 0.8064),
    _cpu("m7i.8xlarge", 32, 128, 12.5, 1.6128),
)  # fmt: skip

INSTANCE_TYPES: dict[str, InstanceFacts] = {facts.name: facts for facts in _ALL}

# The local SLURM cluster's node (`make demo`, python -m cluster.verify.local_slurm): one CPU each, one rank per
# node, gloo; its memory is what a share of a small host gives. Not in INSTANCE_TYPES: no spec deploys it, so a queue
# naming it is refused. llm-submit --local runs on it and llm-plan --instance local-cpu plans its memory (no rate:
# the planner times nothing there).
LOCAL_INSTANCE = InstanceFacts(
    name="local-cpu",
    accelerator="none",
    accelerators_per_node=0,
    accelerator_memory_gib=0.0,
    efa_interfaces=0,
    network_gbps=0.0,
    peak_bf16_flops_per_accelerator=0.0,
    on_demand_usd_per_hour=0.0,
    vcpus=1,
    memory_gib=4.0,
)

ACCELERATED_TYPES: tuple[str, ...] = tuple(name for name, f in INSTANCE_TYPES.items() if f.accelerator != "none")
HEAD_NODE_TYPES: tuple[str, ...] = tuple(name for name, f in INSTANCE_TYPES.items() if f.accelerator == "none")


class UnknownInstanceType(KeyError):
    """An instance type missing from the facts table; str() is one line."""

    def __str__(self) -> str:
        return str(self.args[0])


def instance_facts(name: str) -> InstanceFacts:
    """Facts for `name`; raises UnknownInstanceType (a KeyError) with a one-line message."""
    try:
        return INSTANCE_TYPES[name]
    except (KeyError, TypeError):
        known = ", ".join(INSTANCE_TYPES)
        raise UnknownInstanceType(f"instance type {name!r} is not in the facts table (known: {known})") from None


def on_demand_usd_per_hour(name: str, overrides: Mapping[str, float] | None = None) -> float:
    """The price a plan should use: the spec's override (`cluster.prices`) when given, else the table's default."""
    if overrides and name in overrides:
        return float(overrides[name])
    return instance_facts(name).on_demand_usd_per_hour
