from pathlib import Path

import numpy as np
import torch

from bench.data import RawReader, repeated_dataset
from tests.training.data.conftest import MakeDataset, random_documents
from training.data.indexed import idx_path, open_tokens, read_index
from training.data.loader import LoaderConfig, PackedTokenLoader


def test_raw_reader_hands_out_consecutive_windows_in_the_loaders_form(make_dataset: MakeDataset) -> None:
    prefix = Path(make_dataset(random_documents(40, seed=3)))
    tokens = np.asarray(open_tokens(prefix, read_index(idx_path(prefix))), dtype=np.int64)
    reader = RawReader(prefix, seq_len=8, micro_batch=2)
    loader_batch = next(iter(PackedTokenLoader(LoaderConfig(str(prefix), seq_len=8, micro_batch_size=2), 0, 1)))
    for number in (0, 1, reader.batches):  # the last wraps around to the start
        batch = reader.batch(number)
        first = (number % reader.batches) * 2 * 9
        expected = torch.from_numpy(tokens[first : first + 18].reshape(2, 9))
        assert torch.equal(batch["input_ids"], expected[:, :-1]) and torch.equal(batch["labels"], expected[:, 1:])
        for name, tensor in batch.items():
            reference = loader_batch[name]
            assert (tensor.dtype, tensor.shape, tensor.is_contiguous()) == (
                reference.dtype,
                reference.shape,
                reference.is_contiguous(),
            )


def test_repeated_dataset_repeats_the_documents_in_order_until_the_token_count(
    make_dataset: MakeDataset, tmp_path: Path
) -> None:
    documents = random_documents(5, seed=4)
    source = Path(make_dataset(documents))
    per_pass = sum(doc.size + 1 for doc in documents)
    target = 2 * per_pass + 3
    output = repeated_dataset(source, tmp_path / "repeated_text_document", target)
    index = read_index(idx_path(output))
    assert index.document_count == 11  # two passes, then one more document reaches the count
    assert index.token_count == 2 * per_pass + documents[0].size + 1
    repeated = np.asarray(open_tokens(output, index))
    first_pass = np.asarray(open_tokens(source, read_index(idx_path(source))))
    assert np.array_equal(repeated[:per_pass], first_pass) and np.array_equal(
        repeated[per_pass : 2 * per_pass], first_pass
    )
