import numpy as np
import pytest
from megatron.core.datasets import helpers_cpp
from megatron.core.datasets.utils import normalize

from training.data.blend import BLOCK_SAMPLES, BlendIndex, blend_block


def megatron_blend(weights: list[float], size: int) -> tuple[np.ndarray, np.ndarray]:
    """megatron-core's own BlendedDataset index (its C++ helper), the reference."""
    datasets = np.zeros(size, dtype=np.int16)
    samples = np.zeros(size, dtype=np.int64)
    helpers_cpp.build_blending_indices(datasets, samples, normalize(weights), len(weights), size, False)
    return datasets, samples


@pytest.mark.parametrize("weights", [[0.7, 0.3], [3, 1], [1, 1, 1], [0.5, 0.25, 0.125, 0.125], [0.01, 0.99], [2]])
def test_the_blend_is_megatron_cores_sample_for_sample(weights: list[float]) -> None:
    size = BLOCK_SAMPLES + 5000  # across a block boundary
    index = BlendIndex(weights)
    positions = np.arange(size)
    ours = index.lookup(positions)
    reference = megatron_blend(weights, size)
    assert np.array_equal(ours[0], reference[0]) and np.array_equal(ours[1], reference[1])


def test_an_index_anchored_mid_stream_continues_the_same_blend() -> None:
    weights = [0.6, 0.3, 0.1]
    reference = megatron_blend(weights, 3 * BLOCK_SAMPLES)
    position = BLOCK_SAMPLES + 12345
    counts = np.bincount(reference[0][:position], minlength=3).tolist()
    resumed = BlendIndex(weights, position, counts)
    later = np.arange(position, 3 * BLOCK_SAMPLES)
    datasets, samples = resumed.lookup(later)
    assert np.array_equal(datasets, reference[0][position:]) and np.array_equal(samples, reference[1][position:])
    assert (
        resumed.counts_at(2 * BLOCK_SAMPLES + 7)
        == np.bincount(reference[0][: 2 * BLOCK_SAMPLES + 7], minlength=3).tolist()
    )
    with pytest.raises(IndexError, match="before this blend's anchor"):
        resumed.lookup(np.array([position - 1]))


def test_counts_that_do_not_add_up_to_the_position_are_refused() -> None:
    with pytest.raises(ValueError, match=r"counts \[3, 1\] do not add up to position 5"):
        BlendIndex([1, 1], 5, [3, 1])


def test_weights_are_honoured_to_within_one_sample() -> None:
    weights = [0.5, 0.3, 0.2]
    datasets, _, counts = blend_block(weights, 0, [0, 0, 0], 10_000)
    for share, count in zip(weights, counts, strict=True):
        assert abs(count - share * 10_000) <= 1
    assert np.bincount(datasets).tolist() == counts
