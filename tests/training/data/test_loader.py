from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import training.data.loader as loader_module
from tests.training.data.conftest import EOD_ID, MakeDataset, random_documents
from tests.waiting import wait_until
from training.data.errors import DataError
from training.data.loader import LoaderConfig, PackedTokenLoader

SEQ_LEN = 8


@pytest.fixture
def prefix(make_dataset: MakeDataset) -> str:
    # About 60 samples of 8 tokens: small enough that the tests below cross epoch boundaries.
    return make_dataset(random_documents(24, seed=1))


def config(prefix: str, **overrides: object) -> LoaderConfig:
    values: dict[str, object] = {"data_prefix": prefix, "seq_len": SEQ_LEN, "micro_batch_size": 2}
    values.update(overrides)
    return LoaderConfig(**values)  # type: ignore[arg-type]


def rows(batch: dict[str, torch.Tensor]) -> list[tuple[int, ...]]:
    """Each sample as its full seq_len + 1 tokens, so samples compare by content."""
    full = torch.cat([batch["input_ids"], batch["labels"][:, -1:]], dim=1)
    return [tuple(row) for row in full.tolist()]


def global_stream(loaders: list[PackedTokenLoader], steps: int) -> list[tuple[int, ...]]:
    """What all ranks consumed, step by step, rank 0 first: the order the global stream defines."""
    iterators = [iter(loader) for loader in loaders]
    consumed: list[tuple[int, ...]] = []
    for _ in range(steps):
        for iterator in iterators:
            consumed.extend(rows(next(iterator)))
    return consumed


def test_batch_shapes_dtypes_and_labels_shift(prefix: str) -> None:
    batch = next(iter(PackedTokenLoader(config(prefix), dp_rank=0, dp_world_size=1)))
    assert set(batch) == {"tokens", "input_ids", "labels"}
    assert batch["tokens"].dtype == torch.long and batch["tokens"].shape == (2, SEQ_LEN + 1)
    for name in ("input_ids", "labels"):
        assert batch[name].dtype == torch.long and batch[name].shape == (2, SEQ_LEN)
        assert batch[name].untyped_storage().data_ptr() == batch["tokens"].untyped_storage().data_ptr()  # views
    assert torch.equal(batch["input_ids"], batch["tokens"][:, :-1])
    assert torch.equal(batch["labels"], batch["tokens"][:, 1:])


def test_samples_are_the_documents_packed_with_one_eod_between(make_dataset: MakeDataset) -> None:
    documents = random_documents(10, seed=2)
    loader = PackedTokenLoader(
        config(make_dataset(documents), validation_fraction=0.0, micro_batch_size=1), dp_rank=0, dp_world_size=1
    )
    stream = np.concatenate([np.append(doc, EOD_ID) for doc in documents])
    for sample_id in range(loader.num_samples):
        expected = stream[sample_id * SEQ_LEN : sample_id * SEQ_LEN + SEQ_LEN + 1]
        assert np.array_equal(loader._samples.sample(sample_id), expected)
    assert loader.num_samples == (len(stream) - 1) // SEQ_LEN


def test_each_epoch_is_a_new_permutation_of_all_samples(prefix: str) -> None:
    loader = PackedTokenLoader(config(prefix, micro_batch_size=1), dp_rank=0, dp_world_size=1)
    per_epoch = loader.num_samples
    consumed = [rows(batch)[0] for batch in islice(iter(loader), 2 * per_epoch)]
    epoch0, epoch1 = consumed[:per_epoch], consumed[per_epoch:]
    all_samples = sorted(tuple(loader._samples.sample(i).tolist()) for i in range(per_epoch))
    assert sorted(epoch0) == all_samples and sorted(epoch1) == all_samples
    assert epoch0 != epoch1
    assert loader.epoch == 2 and loader.samples_consumed == 2 * per_epoch


def test_order_is_deterministic_and_seeded(prefix: str) -> None:
    def first_batches(seed: int) -> list[tuple[int, ...]]:
        return global_stream([PackedTokenLoader(config(prefix, seed=seed), 0, 1)], steps=5)

    assert first_batches(7) == first_batches(7)
    assert first_batches(7) != first_batches(8)


def test_ranks_take_disjoint_slices_of_the_global_batch(prefix: str) -> None:
    two_ranks = global_stream([PackedTokenLoader(config(prefix), rank, 2) for rank in range(2)], steps=6)
    one_rank = global_stream([PackedTokenLoader(config(prefix, micro_batch_size=4), 0, 1)], steps=6)
    assert two_ranks == one_rank


def test_exact_resume_at_the_same_size(prefix: str) -> None:
    uninterrupted = global_stream([PackedTokenLoader(config(prefix), rank, 2) for rank in range(2)], steps=40)
    first = [PackedTokenLoader(config(prefix), rank, 2) for rank in range(2)]
    before = global_stream(first, steps=17)
    states = [loader.state_dict() for loader in first]
    assert states[0] == states[1] and states[0]["samples_consumed"] == 17 * 4
    resumed = [PackedTokenLoader(config(prefix), rank, 2) for rank in range(2)]
    for loader in resumed:
        loader.load_state_dict(states[0])
    assert before + global_stream(resumed, steps=23) == uninterrupted


@pytest.mark.parametrize(("before_world", "after_world"), [(2, 1), (1, 2)])
def test_resume_at_another_data_parallel_size(prefix: str, before_world: int, after_world: int) -> None:
    """Global batch 4 samples throughout: 2 ranks x 2, or 1 rank x 2 with two accumulation micro-steps."""
    micro_batch, global_batch, steps = 2, 4, 40

    def loaders(world: int) -> list[PackedTokenLoader]:
        return [PackedTokenLoader(config(prefix, micro_batch_size=micro_batch), rank, world) for rank in range(world)]

    def run(group: list[PackedTokenLoader], optimizer_steps: int) -> list[tuple[int, ...]]:
        accumulation = global_batch // (micro_batch * len(group))
        return global_stream(group, steps=optimizer_steps * accumulation)

    uninterrupted = run(loaders(2), steps)
    first = loaders(before_world)
    consumed = run(first, 13)
    state = first[0].state_dict()
    second = loaders(after_world)
    for loader in second:
        loader.load_state_dict(state)
    consumed += run(second, steps - 13)
    assert consumed == uninterrupted  # same order, hence the same multiset
    assert sorted(consumed) == sorted(uninterrupted)
    assert consumed[: first[0].num_samples] != sorted(consumed[: first[0].num_samples])  # it was shuffled


def test_prefetcher_does_not_advance_the_state(prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    loader = PackedTokenLoader(config(prefix, prefetch=4), dp_rank=0, dp_world_size=1)
    monkeypatch.setattr(loader_module, "READ_AHEAD_BATCHES", 1)  # one batch per read-ahead chunk
    built: list[int] = []
    gather = loader._gather_ahead

    def counting_gather(position: int, at_most: int | None, buffer: np.ndarray | None = None) -> Any:
        built.append(position)
        return gather(position, at_most, buffer)

    monkeypatch.setattr(loader, "_gather_ahead", counting_gather)
    iterator = iter(loader)
    first = next(iterator)
    # The thread runs ahead: one batch handed out, four waiting in the queue.
    wait_until(lambda: len(built) >= 5, "the loader's thread to build four batches ahead", poll_s=0.01)
    state = loader.state_dict()
    assert state["samples_consumed"] == 2
    iterator.close()
    resumed = PackedTokenLoader(config(prefix, prefetch=0), dp_rank=0, dp_world_size=1)
    resumed.load_state_dict(state)
    reference = list(islice(iter(PackedTokenLoader(config(prefix, prefetch=0), 0, 1)), 2))
    assert rows(first) == rows(reference[0])
    assert rows(next(iter(resumed))) == rows(reference[1])


def test_new_iterator_continues_from_the_state_and_stops_the_old_one(prefix: str) -> None:
    loader = PackedTokenLoader(config(prefix), dp_rank=0, dp_world_size=1)
    old = iter(loader)
    next(old)
    next(old)
    new = iter(loader)
    assert loader.samples_consumed == 4
    batch = next(new)
    reference = list(islice(iter(PackedTokenLoader(config(prefix), 0, 1)), 3))
    assert rows(batch) == rows(reference[2])
    assert list(old) == []  # stopped: yields nothing more and does not touch the state
    assert loader.samples_consumed == 6


def test_validation_split_is_held_out_and_restarts_each_pass(prefix: str) -> None:
    train = PackedTokenLoader(config(prefix, validation_fraction=0.25), 0, 1, split="train")
    validation = PackedTokenLoader(config(prefix, validation_fraction=0.25), 0, 1, split="validation")
    first_pass = [rows(batch) for batch in validation]
    assert len(first_pass) == validation.num_samples // 2 > 0
    assert [rows(batch) for batch in validation] == first_pass
    train_samples = {tuple(train._samples.sample(i).tolist()) for i in range(train.num_samples)}
    validation_samples = {row for batch in first_pass for row in batch}
    assert not train_samples & validation_samples
    assert train.num_samples + validation.num_samples <= (24 * 21) // SEQ_LEN


def test_validation_split_smaller_than_a_global_batch_is_refused(prefix: str) -> None:
    with pytest.raises(DataError, match="fewer than one global batch"):
        PackedTokenLoader(config(prefix, validation_fraction=0.05, micro_batch_size=32), 0, 1, split="validation")


def test_state_from_another_configuration_is_refused(prefix: str) -> None:
    state = PackedTokenLoader(config(prefix), 0, 1).state_dict()
    other = PackedTokenLoader(config(prefix, seed=99), 0, 1)
    with pytest.raises(ValueError, match=r"loader state: seed: 1234 does not match this loader's 99"):
        other.load_state_dict(state)
    with pytest.raises(ValueError, match="samples_consumed"):
        PackedTokenLoader(config(prefix), 0, 1).load_state_dict({**state, "samples_consumed": -1})


def test_errors_in_the_prefetch_thread_reach_the_trainer(prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    loader = PackedTokenLoader(config(prefix, prefetch=2), 0, 1)

    def broken(indices: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        raise OSError("disk went away")

    monkeypatch.setattr(loader._samples, "batch", broken)
    with pytest.raises(OSError, match="disk went away"):
        next(iter(loader))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"seq_len": 0}, r"LoaderConfig.seq_len: 0 must be an integer >= 1"),
        ({"micro_batch_size": 1.5}, r"LoaderConfig.micro_batch_size: 1.5"),
        ({"validation_fraction": 1.0}, r"LoaderConfig.validation_fraction: 1.0"),
        ({"prefetch": -1}, r"LoaderConfig.prefetch: -1"),
    ],
)
def test_bad_config_is_a_one_line_error(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        config("unused", **overrides)


def test_bad_rank_and_split_are_one_line_errors(prefix: str) -> None:
    with pytest.raises(ValueError, match=r"dp_rank: 2 must be an integer in \[0, 2\)"):
        PackedTokenLoader(config(prefix), dp_rank=2, dp_world_size=2)
    with pytest.raises(ValueError, match=r"split: 'test' must be one of"):
        PackedTokenLoader(config(prefix), dp_rank=0, dp_world_size=1, split="test")


def test_dataset_shorter_than_one_sample_is_refused(make_dataset: MakeDataset) -> None:
    prefix = make_dataset([np.array([5, 6, 7])])
    with pytest.raises(DataError, match=r"shorter than one sample of seq_len \+ 1 = 9 tokens"):
        PackedTokenLoader(config(prefix, validation_fraction=0.0), 0, 1)


def test_truncated_bin_fails_at_start(prefix: str) -> None:
    path = Path(f"{prefix}.bin")
    path.write_bytes(path.read_bytes()[:-6])
    with pytest.raises(DataError, match=r"_text_document.bin: truncated: manifest expects \d+ bytes, found \d+"):
        PackedTokenLoader(config(prefix), 0, 1)


def test_truncated_idx_fails_at_start(prefix: str) -> None:
    path = Path(f"{prefix}.idx")
    path.write_bytes(path.read_bytes()[:-8])
    with pytest.raises(DataError, match=r"_text_document.idx: truncated"):
        PackedTokenLoader(config(prefix), 0, 1)


def test_properties_come_from_the_manifest(prefix: str) -> None:
    loader = PackedTokenLoader(config(prefix), 0, 1)
    assert (loader.vocab_size, loader.eod_id, loader.samples_consumed) == (1000, EOD_ID, 0)


@pytest.mark.parametrize("prefetch", [0, 2])
def test_pinned_batches_are_widened_into_page_locked_memory(
    prefix: str, prefetch: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With pin_memory (the trainer's setting on CUDA) each batch is allocated page-locked and equals the unpinned
    one. Where torch has a pinned allocator the tensors are pinned; on a CPU-only build torch refuses the
    allocation, which shows the loader asked for it, and the allocation is recorded through a stand-in."""
    plain = list(islice(iter(PackedTokenLoader(config(prefix, prefetch=prefetch), 0, 1)), 5))
    pinned_loader = PackedTokenLoader(config(prefix, prefetch=prefetch, pin_memory=True), 0, 1)
    if torch.accelerator.is_available():
        pinned = list(islice(iter(pinned_loader), 5))
        assert all(batch["tokens"].is_pinned() for batch in pinned)
    else:
        with pytest.raises(RuntimeError, match="pin_memory=True requires"):
            next(iter(pinned_loader))
        requested: list[bool] = []
        real_empty = torch.empty

        def recording_empty(*args: Any, pin_memory: bool = False, **kwargs: Any) -> torch.Tensor:
            requested.append(pin_memory)
            return real_empty(*args, **kwargs)

        monkeypatch.setattr(torch, "empty", recording_empty)
        pinned = list(islice(iter(PackedTokenLoader(config(prefix, prefetch=prefetch, pin_memory=True), 0, 1)), 5))
        assert requested == [True] * 5
    for got, want in zip(pinned, plain, strict=True):
        assert torch.equal(got["tokens"], want["tokens"]) and torch.equal(got["labels"], want["tokens"][:, 1:])
