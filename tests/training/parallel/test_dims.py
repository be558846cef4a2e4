"""One layout type (training/parallel/dims.py) for the trainer's mesh, the planner and llm-submit's renderers."""

from __future__ import annotations

import inspect

import launch.nemo
import planner.job_config
import training.parallel.mesh
from launch.nemo import nemo_config
from planner.job_config import planner_job
from training.config import ParallelSection
from training.parallel.dims import DATA_PARALLEL_ONLY, ParallelDims
from training.parallel.mesh import build_mesh, data_parallel_shape


def test_model_and_data_parallel_sizes() -> None:
    dims = ParallelDims(tp=2, pp=4, cp=2)
    assert dims.model_parallel == 16 and dims.data_parallel(64) == 4
    assert DATA_PARALLEL_ONLY.model_parallel == 1 and DATA_PARALLEL_ONLY.data_parallel(8) == 8
    assert ParallelDims(dp_replicate=2, dp_shard=8).dp_size == 16


def test_the_trainers_mesh_the_planner_and_the_renderers_take_the_same_type() -> None:
    assert data_parallel_shape(ParallelSection(dp_replicate=2), 16) == ParallelDims(dp_replicate=2, dp_shard=8)
    for function in (build_mesh, planner_job, nemo_config):
        hints = inspect.get_annotations(function, eval_str=True)
        assert ParallelDims in (hints.get("dims"), hints.get("layout")), function.__qualname__
    # The three layout types it replaces are gone.
    assert not hasattr(planner.job_config, "Layout")
    assert not hasattr(launch.nemo, "Layout")
    assert not hasattr(training.parallel.mesh, "DataParallelShape")
