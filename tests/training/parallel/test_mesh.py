import pytest

from training.config import ParallelSection
from training.parallel.mesh import data_parallel_shape


def test_fsdp_shards_over_the_whole_world_by_default() -> None:
    shape = data_parallel_shape(ParallelSection(), 8)
    assert (shape.dp_replicate, shape.dp_shard, shape.dp_size) == (1, 8, 8)


def test_hsdp_replicates_across_groups_and_shards_within() -> None:
    shape = data_parallel_shape(ParallelSection(dp_replicate=2), 16)
    assert (shape.dp_replicate, shape.dp_shard) == (2, 8)
    per_node = data_parallel_shape(ParallelSection(dp_replicate=-1, dp_shard=8), 32)
    assert (per_node.dp_replicate, per_node.dp_shard) == (4, 8)


@pytest.mark.parametrize(
    ("section", "message"),
    [
        (ParallelSection(dp_replicate=3), r"parallel.dp_replicate: 3 does not divide the world size \(8 processes\)"),
        (ParallelSection(dp_replicate=2, dp_shard=2), r"parallel.dp_shard: 2 x parallel.dp_replicate 2 must equal"),
        (ParallelSection(dp_replicate=-1, dp_shard=3), r"parallel.dp_shard: 3 does not divide the world size"),
    ],
)
def test_shapes_that_do_not_fit_the_world_name_the_field(section: ParallelSection, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        data_parallel_shape(section, 8)
