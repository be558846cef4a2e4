"""The data-parallel device mesh: 1-D for FSDP, 2-D (replicate x shard) for HSDP."""

from __future__ import annotations

from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from training.config import ParallelSection
from training.parallel.dims import ParallelDims


def data_parallel_shape(section: ParallelSection, world_size: int) -> ParallelDims:
    """The section's dp_replicate x dp_shard resolved for `world_size` ranks (the trainer has no model parallel)."""
    replicate, shard = section.dp_replicate, section.dp_shard
    if replicate == -1:
        if world_size % shard:
            raise ValueError(f"parallel.dp_shard: {shard} does not divide the world size ({world_size} processes)")
        replicate = world_size // shard
    if world_size % replicate:
        raise ValueError(f"parallel.dp_replicate: {replicate} does not divide the world size ({world_size} processes)")
    if shard == -1:
        shard = world_size // replicate
    if replicate * shard != world_size:
        raise ValueError(
            f"parallel.dp_shard: {section.dp_shard} x parallel.dp_replicate {section.dp_replicate} "
            f"must equal the world size ({world_size} processes)"
        )
    return ParallelDims(dp_replicate=replicate, dp_shard=shard)


def build_mesh(dims: ParallelDims, device_type: str) -> DeviceMesh:
    if dims.dp_replicate == 1:
        return init_device_mesh(device_type, (dims.dp_shard,), mesh_dim_names=("dp_shard",))
    return init_device_mesh(
        device_type, (dims.dp_replicate, dims.dp_shard), mesh_dim_names=("dp_replicate", "dp_shard")
    )
