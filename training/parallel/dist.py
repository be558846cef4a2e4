"""Process group setup for torchrun (env://), srun without torchrun (SLURM_* variables) or a single process."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistContext:
    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    backend: str

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def _env_int(*names: str, default: int) -> int:
    for name in names:
        value = os.environ.get(name)
        if value is not None:
            try:
                return int(value)
            except ValueError:
                raise ValueError(f"environment {name}: {value!r} is not an integer") from None
    return default


def init_distributed(timeout_s: float = 1800.0) -> DistContext:
    """Join (or, for one process, create) the default process group; NCCL on GPU, gloo on CPU."""
    rank = _env_int("RANK", "SLURM_PROCID", default=0)
    world_size = _env_int("WORLD_SIZE", "SLURM_NTASKS", default=1)
    local_rank = _env_int("LOCAL_RANK", "SLURM_LOCALID", default=0)
    if torch.cuda.is_available():
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        backend = "nccl"
    else:
        device, backend = torch.device("cpu"), "gloo"
    timeout = timedelta(seconds=timeout_s)
    if not dist.is_initialized():
        if world_size == 1 and "MASTER_ADDR" not in os.environ:
            dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1, timeout=timeout)
        else:
            for name in ("MASTER_ADDR", "MASTER_PORT"):
                if name not in os.environ:
                    raise ValueError(f"environment {name}: is required for {world_size} processes (use torchrun)")
            dist.init_process_group(
                backend,
                init_method="env://",
                rank=rank,
                world_size=world_size,
                timeout=timeout,
                device_id=device if backend == "nccl" else None,
            )
    return DistContext(rank=rank, world_size=world_size, local_rank=local_rank, device=device, backend=backend)


def shutdown_distributed() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()
