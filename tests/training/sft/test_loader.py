from pathlib import Path

import numpy as np
import pytest

from tests.training.sft.conftest import write_rows
from training.data.errors import DataError
from training.data.loader import LoaderConfig
from training.models.loss import IGNORE_INDEX
from training.sft.loader import SFTLoader
from training.sft.packing import first_fit
from training.sft.prepare import loss_mask_prefix, prepare_sft


def test_first_fit_packs_whole_samples_into_the_first_row_with_room() -> None:
    rows = first_fit(np.array([5, 4, 3, 2, 6, 1]), capacity=8)
    assert [list(row) for row in rows] == [[0, 2], [1, 3, 5], [4]]
    with pytest.raises(DataError, match=r"9 positions.*seq_len 8"):
        first_fit(np.array([3, 9]), capacity=8)


@pytest.fixture
def sft_prefix(tokenizer_dir: Path, tmp_path: Path) -> str:
    rows = [{"prompt": f"Question {i}?" + " pad" * (i % 5), "response": f"Answer number {i}."} for i in range(60)]
    prepared = prepare_sft(
        [write_rows(tmp_path / "rows.jsonl", rows)], tmp_path / "sft", tokenizer_path=tokenizer_dir / "tokenizer.json"
    )
    return str(prepared.tokens_prefix)


def _megatron(prefix: Path) -> list[np.ndarray]:
    from tests.training.sft.test_prepare import megatron_read

    return megatron_read(prefix)


def test_a_batch_holds_whole_samples_with_restarting_positions_and_only_response_labels(
    sft_prefix: str, tmp_path: Path
) -> None:
    config = LoaderConfig(data_prefix=sft_prefix, seq_len=64, micro_batch_size=2, validation_fraction=0.1, prefetch=0)
    loader = SFTLoader(config, dp_rank=0, dp_world_size=1)
    tokens = _megatron(Path(sft_prefix))
    masks = _megatron(loss_mask_prefix(tmp_path / "sft"))
    batch = next(iter(loader))
    assert set(batch) == {"input_ids", "labels", "loss_mask", "position_ids", "document_ids"}
    for row in range(2):
        ids, labels = batch["input_ids"][row].numpy(), batch["labels"][row].numpy()
        positions, documents = batch["position_ids"][row].numpy(), batch["document_ids"][row].numpy()
        starts = np.flatnonzero(positions == 0)
        assert np.array_equal(documents[starts], np.arange(len(starts)))
        for begin, end in zip(starts, [*starts[1:], 64], strict=True):
            if labels[begin:end].max() == IGNORE_INDEX:  # the padding after the last sample
                continue
            # Each packed sample is one whole sample of the dataset: inputs tokens[:-1], labels tokens[1:] where
            # the mask says trained.
            match = [
                i for i, t in enumerate(tokens) if len(t) - 1 == end - begin and np.array_equal(t[:-1], ids[begin:end])
            ]
            assert match, (row, begin)
            sample, mask = tokens[match[0]], masks[match[0]]
            assert np.array_equal(labels[begin:end], np.where(mask[1:] == 1, sample[1:], IGNORE_INDEX))
            assert np.array_equal(positions[begin:end], np.arange(end - begin))
    assert np.array_equal(batch["loss_mask"].numpy(), batch["labels"].numpy() != IGNORE_INDEX)


def _packed_samples(loader: SFTLoader) -> list[tuple[int, ...]]:
    """Every sample of one epoch, as its input ids; padding (no trained label) left out."""
    seen = []
    for _, batch in zip(range(loader.num_samples // loader.global_batch_size), loader, strict=False):
        for ids, labels, documents in zip(batch["input_ids"], batch["labels"], batch["document_ids"], strict=True):
            for document in documents.unique().tolist():
                inside = documents == document
                if (labels[inside] != IGNORE_INDEX).any():
                    seen.append(tuple(ids[inside].tolist()))
    return seen


def test_every_training_sample_is_packed_once_per_epoch_and_validation_is_held_out(sft_prefix: str) -> None:
    config = LoaderConfig(data_prefix=sft_prefix, seq_len=64, micro_batch_size=1, validation_fraction=0.1, prefetch=0)
    trained = _packed_samples(SFTLoader(config, 0, 1))
    held_out = _packed_samples(SFTLoader(config, 0, 1, split="validation"))
    assert (len(trained), len(held_out)) == (54, 6)
    assert len(set(trained)) == 54 and not set(trained) & set(held_out)


def test_a_sample_longer_than_seq_len_is_refused_naming_it(sft_prefix: str) -> None:
    config = LoaderConfig(data_prefix=sft_prefix, seq_len=8, micro_batch_size=1, prefetch=0)
    with pytest.raises(DataError, match=r"data.seq_len: 8 .* sample \d+ .* positions"):
        SFTLoader(config, 0, 1)


def test_resume_continues_with_the_same_rows(sft_prefix: str) -> None:
    config = LoaderConfig(data_prefix=sft_prefix, seq_len=64, micro_batch_size=2, validation_fraction=0.1, prefetch=0)
    loader = SFTLoader(config, 0, 1)
    batches = iter(loader)
    for _ in range(3):
        next(batches)
    state = loader.state_dict()
    expected = next(batches)["input_ids"]
    other = SFTLoader(config, 0, 1)
    other.load_state_dict(state)
    assert np.array_equal(next(iter(other))["input_ids"].numpy(), expected.numpy())
