"""The one parallel layout of a job: how its ranks split into tensor (tp), pipeline (pp), context (cp), expert (ep)
and data-parallel groups, the last as dp_replicate x dp_shard (HSDP's 2-D mesh; FSDP: one replica).
torchtitan's ParallelDims, without the mesh: the trainer builds its DeviceMesh from it (training/parallel/mesh.py),
the planner plans it (planner.job_config) and llm-submit renders Megatron's and NxDT's sizes from it. No torch.
Each reader checks the sizes it takes, in its own option's words (launch.nemo.check_parallel, mesh's
data_parallel_shape, planner.job.Job).
"""

from __future__ import annotations

from dataclasses import dataclass

THE_REST = -1  # dp_shard (or dp_replicate): the ranks the other sizes leave


@dataclass(frozen=True)
class ParallelDims:
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    dp_replicate: int = 1
    dp_shard: int = THE_REST

    @property
    def model_parallel(self) -> int:
        """Ranks that share one sequence's micro-batch: TP x PP x CP."""
        return self.tp * self.pp * self.cp

    def data_parallel(self, world_size: int) -> int:
        """Ranks that take different sequences out of `world_size`."""
        return world_size // self.model_parallel

    @property
    def dp_size(self) -> int:
        """dp_replicate x dp_shard, once both are resolved (neither THE_REST)."""
        return self.dp_replicate * self.dp_shard


# The FSDP trainer's layout (and the default elsewhere): every rank data-parallel.
DATA_PARALLEL_ONLY = ParallelDims()
