"""The data-parallel device mesh: 1-D for FSDP, 2-D (replicate x shard) for HSDP."""

from __future__ import annotations

from dataclasses import dataclass

from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from training.config import ParallelSection


@dataclass(frozen=True)
class DataParallelShape:
    replicate: int
    shard: int

    @property
    def size(self) -> int:
        return self.replicate * self.shard


def data_parallel_shape(section: ParallelSection, world_size: int) -> DataParallelShape:
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
    return DataParallelShape(replicate=replicate, shard=shard)


def build_mesh(shape: DataParallelShape, device_type: str) -> DeviceMesh:
    if shape.replicate == 1:
        return init_device_mesh(device_type, (shape.shard,), mesh_dim_names=("dp_shard",))
    return init_device_mesh(device_type, (shape.replicate, shape.shard), mesh_dim_names=("dp_replicate", "dp_shard"))
