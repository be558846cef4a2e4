"""Does this rank's share of the training state fit its device? Checked before any weight is materialized.

The state of a trained parameter is 16 bytes however the step computes: the fp32 weight FSDP keeps sharded, its
fp32 gradient and AdamW's two fp32 moments (training/optim.py). A frozen one (LoRA's base) is its weight alone, in
the dtype it was frozen in (training/finetune/lora.py: bf16 wherever the step computes in bf16). FSDP shards it over the data-parallel shard dimension
(HSDP replicates it across groups). Activations and the gathered bf16 weights come on top, so passing this check
is necessary, not sufficient: `llm-submit` runs the planner's full model before a job is queued. Failing it means
the job cannot start on this hardware, however often it is requeued, so it is a config error (exit 2).

The device's memory: a GPU's total memory; on a CPU the memory the host has available now, divided among the
ranks this node runs (torchrun's LOCAL_WORLD_SIZE), since they share it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

from training.config import ConfigError

STATE_BYTES_PER_PARAMETER = 16  # fp32 weight + fp32 gradient + AdamW exp_avg + exp_avg_sq
_GIB = float(1 << 30)


@dataclass(frozen=True)
class DeviceMemory:
    bytes: int
    source: str  # where the number came from, for the error message


def state_bytes_per_rank(parameters: int, shards: int, frozen: int = 0, frozen_bytes: int = 2) -> int:
    """`parameters` in all, `frozen` of them held as weights of `frozen_bytes` each, sharded over `shards`."""
    total = (parameters - frozen) * STATE_BYTES_PER_PARAMETER + frozen * frozen_bytes
    return -(-total // shards)


def host_available_bytes(meminfo: Path = Path("/proc/meminfo")) -> int:
    for line in meminfo.read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    raise ValueError(f"{meminfo} has no MemAvailable line")


def device_memory(device: torch.device, local_ranks: int) -> DeviceMemory:
    if device.type == "cuda":
        total = torch.cuda.get_device_properties(device).total_memory
        return DeviceMemory(total, f"{torch.cuda.get_device_name(device)} total memory")
    available = host_available_bytes()
    return DeviceMemory(
        available // local_ranks,
        f"{available / _GIB:.1f} GiB available on this host / {local_ranks} ranks on this node",
    )


def local_world_size() -> int:
    """Ranks on this node: torchrun's LOCAL_WORLD_SIZE, else Slurm's tasks on this node, else 1."""
    for name in ("LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE"):
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    return 1


def check_state_fits(
    model: str,
    parameters: int,
    shards: int,
    memory: DeviceMemory,
    device_type: str,
    frozen: int = 0,
    frozen_bytes: int = 2,
) -> None:
    """model: the config field and value that chose the model, e.g. "model.name: 'llama3-8b'"; `frozen` of the
    `parameters` are held as weights only (LoRA's base), `frozen_bytes` each."""
    needed = state_bytes_per_rank(parameters, shards, frozen, frozen_bytes)
    if needed <= memory.bytes:
        return
    trained = parameters - frozen
    state = (
        f"{trained / 1e9:.2f}B parameters x {STATE_BYTES_PER_PARAMETER} bytes: fp32 weights, gradients and AdamW "
        "moments"
    )
    if frozen:
        state += f"; {frozen / 1e9:.2f}B frozen x {frozen_bytes} bytes"
    raise ConfigError(
        [
            f"{model} does not fit: its training state ({state}) sharded over {shards} "
            f"ranks needs {needed / _GIB:.1f} GiB per rank, more than this {device_type} rank has "
            f"({memory.bytes / _GIB:.1f} GiB: {memory.source}); use more nodes, a smaller model or GPUs with "
            "more memory"
        ]
    )
