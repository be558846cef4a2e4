import numpy as np
import pytest

from training.data.errors import DataError
from training.data.packing import PackedSamples, Spans, epoch_order, split_documents


def test_neighbouring_documents_form_one_span() -> None:
    starts = np.array([0, 5, 9, 20, 26])
    ends = np.array([5, 9, 20, 26, 30])
    spans = Spans.for_documents(starts, ends, np.array([0, 1, 3, 4]))
    assert spans.starts.tolist() == [0, 20]
    assert spans.stream_offsets.tolist() == [0, 9, 19]


def test_samples_cross_span_boundaries_and_overlap_by_one_token() -> None:
    tokens = np.arange(100, 130)
    spans = Spans.for_documents(np.array([0, 10, 20]), np.array([10, 20, 30]), np.array([0, 2]))
    samples = PackedSamples(tokens, spans, seq_len=4)
    assert samples.num_samples == 4  # 20 tokens: samples need seq_len + 1, stride seq_len
    assert samples.sample(0).tolist() == [100, 101, 102, 103, 104]
    assert samples.sample(2).tolist() == [108, 109, 120, 121, 122]
    assert samples.batch(np.array([3, 1])).tolist() == [[122, 123, 124, 125, 126], [104, 105, 106, 107, 108]]
    with pytest.raises(IndexError):
        samples.sample(4)


def test_validation_documents_are_a_seeded_disjoint_draw() -> None:
    train, validation = split_documents(200, 0.05, seed=1)
    assert len(validation) == 10 and len(train) == 190
    assert sorted(np.concatenate([train, validation]).tolist()) == list(range(200))
    assert np.array_equal(split_documents(200, 0.05, seed=1)[1], validation)
    assert not np.array_equal(split_documents(200, 0.05, seed=2)[1], validation)
    assert len(split_documents(10, 0.01, seed=1)[1]) == 1  # a positive fraction holds out at least one
    assert len(split_documents(10, 0.0, seed=1)[1]) == 0


def _runs(documents: np.ndarray) -> list[int]:
    """Lengths of the runs of consecutive ids in a sorted array."""
    breaks = np.flatnonzero(np.diff(documents) != 1)
    return np.diff(np.concatenate([[0], breaks + 1, [len(documents)]])).tolist()


@pytest.mark.parametrize(
    ("documents", "fraction", "run_count"),
    [(100_000, 0.01, 17), (10_000, 0.01, 17), (200, 0.05, 10), (10, 0.2, 2)],
)
def test_validation_documents_are_held_out_in_runs_of_neighbours(
    documents: int, fraction: float, run_count: int
) -> None:
    train, validation = split_documents(documents, fraction, seed=3)
    assert len(validation) == round(fraction * documents) and len(train) + len(validation) == documents
    runs = _runs(validation)  # neighbouring runs may touch and merge, so at most run_count
    assert 1 <= len(runs) <= run_count and max(runs) <= 64
    assert len(_runs(train)) <= run_count + 1  # each held-out run splits the train stream at most once


def test_very_large_fractions_fall_back_to_single_documents() -> None:
    train, validation = split_documents(100, 0.99, seed=1)
    assert len(validation) == 99 and len(train) == 1


def test_holding_out_every_document_is_refused() -> None:
    with pytest.raises(DataError, match=r"validation_fraction: 0.9 holds out 2 of 2 documents"):
        split_documents(2, 0.9, seed=1)


def test_epoch_order_is_a_seeded_permutation() -> None:
    order = epoch_order(1000, seed=5, epoch=0)
    assert order.dtype == np.uint32 and sorted(order.tolist()) == list(range(1000))
    assert np.array_equal(order, epoch_order(1000, seed=5, epoch=0))
    assert not np.array_equal(order, epoch_order(1000, seed=5, epoch=1))
