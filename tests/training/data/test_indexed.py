import warnings
from pathlib import Path

import numpy as np
import pytest

from tests.training.data.conftest import EOD_ID, MakeDataset, random_documents
from training.data.errors import DataError
from training.data.indexed import idx_path, open_tokens, read_index, token_dtype_for_vocab


def test_reading_agrees_with_megatron_cores_own_reader(make_dataset: MakeDataset) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.datasets.indexed_dataset import IndexedDataset

    documents = random_documents(9, seed=4)
    prefix = make_dataset(documents)
    index = read_index(idx_path(prefix))
    tokens = open_tokens(prefix, index)
    reference = IndexedDataset(prefix, mmap=True)
    assert np.array_equal(index.sequence_lengths, reference.sequence_lengths)
    assert np.array_equal(index.document_indices, reference.document_indices)
    starts, ends = index.document_token_bounds()
    for doc_id, document in enumerate(documents):
        assert np.array_equal(tokens[starts[doc_id] : ends[doc_id]], reference[doc_id])
        assert np.array_equal(reference[doc_id], np.append(document, EOD_ID))


def test_dtype_follows_the_vocabulary_size() -> None:
    assert token_dtype_for_vocab(65_499) is np.uint16
    assert token_dtype_for_vocab(65_500) is np.int32


def test_not_an_index_file(tmp_path: Path) -> None:
    path = tmp_path / "x.idx"
    path.write_bytes(b"NOTMAGIC!" + bytes(40))
    with pytest.raises(DataError, match=r"x.idx: not a Megatron .idx file"):
        read_index(path)
    path.write_bytes(b"MMIDIDX")
    with pytest.raises(DataError, match=r"x.idx: truncated .idx: expected at least 34 header bytes, found 7"):
        read_index(path)
