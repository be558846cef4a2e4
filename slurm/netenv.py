"""The job environment per backend and target: EFA/NCCL on GPU nodes, the NeMo 2 extras, the Neuron runtime.

Only what applies is set. Version rules (libfabric, aws-ofi-nccl) decide the EFA variables older stacks needed;
the defaults are the oldest versions for which nothing extra is needed, which current ParallelCluster AMIs exceed.
"""

from __future__ import annotations

import re

from slurm.errors import SubmitError
from slurm.target import Target

DEFAULT_LIBFABRIC = "1.18.0"
DEFAULT_AWS_OFI_NCCL = "1.7.3"
_VERSION_RE = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?$")

# Set once, in the NxDT config's compiler_flags: NxDT appends them to $NEURON_CC_FLAGS itself.
NEURON_CC_FLAGS = "--model-type transformer --distribution-strategy=llm-training --enable-mixed-precision-accumulation"


def parse_version(text: str, option: str) -> tuple[int, int, int]:
    match = _VERSION_RE.match(text)
    if match is None:
        raise SubmitError(f"{option}: {text!r} is not a version such as 1.18.0")
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


def common_env() -> dict[str, str]:
    # Python tracebacks of every thread on a fatal signal: what a hung or crashed rank was doing.
    return {"PYTHONFAULTHANDLER": "1", "PYTHONUNBUFFERED": "1"}


# The aws-ofi-nccl plugin's name for NCCL_NET, and where the ParallelCluster AMI (and the EFA image built from
# containers/nemo-efa) keep libfabric, the plugin and Open MPI: on LD_LIBRARY_PATH so NCCL finds the plugin.
NCCL_NET_OFI = "AWS Libfabric"
EFA_LIBRARY_DIRS: tuple[str, ...] = ("/opt/amazon/efa/lib", "/opt/amazon/ofi-nccl/lib", "/opt/amazon/openmpi/lib")

NCCL_DEBUG_LEVELS: tuple[str, ...] = ("VERSION", "WARN", "INFO", "TRACE")


def gpu_env(
    target: Target,
    libfabric: str = DEFAULT_LIBFABRIC,
    aws_ofi_nccl: str = DEFAULT_AWS_OFI_NCCL,
    nccl_debug: str = "WARN",
) -> dict[str, str]:
    """NCCL (and NCCL over EFA when the queue has it) for a GPU target."""
    if nccl_debug not in NCCL_DEBUG_LEVELS:
        raise SubmitError(f"--nccl-debug: {nccl_debug!r} is not one of {', '.join(NCCL_DEBUG_LEVELS)}")
    libfabric_v = parse_version(libfabric, "--libfabric-version")
    ofi_v = parse_version(aws_ofi_nccl, "--aws-ofi-nccl-version")
    env = {
        "NCCL_DEBUG": nccl_debug,  # INFO when debugging: prints the transport (look for "NET/OFI" with EFA)
        "NCCL_SOCKET_IFNAME": "^docker,lo,veth",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
    }
    if not target.efa:
        return env
    # The instance's floor is a catalogue fact (spec/platform/instances.py says why p5 and p6 have one).
    floor = target.instance.min_aws_ofi_nccl
    if floor is not None and ofi_v < floor:
        needed = ".".join(map(str, floor))
        raise SubmitError(
            f"--aws-ofi-nccl-version: {aws_ofi_nccl} is too old for {target.instance.name} (needs {needed} or newer)"
        )
    # NCCL_NET names the aws-ofi-nccl plugin: without it found, NCCL fails instead of falling back to sockets.
    env.update(
        {
            "FI_PROVIDER": "efa",
            "FI_EFA_USE_HUGE_PAGE": "0",
            "FI_EFA_SET_CUDA_SYNC_MEMOPS": "0",
            "NCCL_NET": NCCL_NET_OFI,
        }
    )
    if libfabric_v < (1, 18, 0) or ofi_v < (1, 7, 0):
        env["FI_EFA_USE_DEVICE_RDMA"] = "1"  # GPUDirect RDMA is automatic from libfabric 1.18 / aws-ofi-nccl 1.7
    if ofi_v < (1, 6, 0):
        env["NCCL_PROTO"] = "simple"  # aws-ofi-nccl 1.5 and older cannot run NCCL's LL protocols over EFA
    return env


def torch_cuda_env() -> dict[str, str]:
    """Our PyTorch trainer on GPUs, as torchtitan's launcher runs it: the caching allocator grows segments in
    place instead of carving fixed blocks, so varying activation and FSDP buffer sizes do not fragment memory
    into out-of-memory errors; and torch's flight recorder is on. Not given to NeMo jobs: their allocator settings
    are the container image's and NeMo's (not checked against the image here, which cannot be pulled offline)."""
    # The flight recorder keeps each process group's last collectives: the hang watchdog (training/watchdog.py)
    # dumps them beside the stack traces, to tell which collective each rank waited in.
    return {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "TORCH_FR_BUFFER_SIZE": "2000"}


def nemo_env() -> dict[str, str]:
    return {
        "TORCH_NCCL_AVOID_RECORD_STREAMS": "1",
        "NVTE_DP_AMAX_REDUCE_INTERVAL": "0",
        "NVTE_ASYNC_AMAX_REDUCTION": "1",
    }


def neuron_env(target: Target) -> dict[str, str]:
    if target.neuron is None:
        raise SubmitError("--backend neuron: the spec has no cluster.neuron section")
    env = {
        "NEURON_RT_STOCHASTIC_ROUNDING_EN": "1",
        "XLA_USE_BF16": "1",
        "MALLOC_ARENA_MAX": "128",
        "NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS": "5",
        "NEURON_COMPILE_CACHE_URL": target.neuron.compile_cache_dir,
    }
    if target.efa:
        env.update({"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1", "FI_EFA_FORK_SAFE": "1"})
    return env


def cpu_env() -> dict[str, str]:
    # One rank per single-CPU node: more threads than cores only adds contention.
    return {"OMP_NUM_THREADS": "1"}
