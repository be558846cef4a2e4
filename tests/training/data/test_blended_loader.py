import numpy as np
import pytest

from tests.training.data.conftest import MakeDataset, random_documents
from tests.training.data.test_loader import config, global_stream, rows
from training.data.blend import BlendIndex
from training.data.blended_loader import BlendedTokenLoader
from training.data.errors import DataError
from training.data.loader import PackedTokenLoader

Mixture = list[tuple[float, str]]


@pytest.fixture
def mixture(make_dataset: MakeDataset) -> Mixture:
    # Two sources of different sizes (about 60 and 25 samples of 8 tokens): the tests cross both's epochs.
    web = make_dataset(random_documents(24, seed=1), name="web")
    code = make_dataset(random_documents(10, seed=5), name="code")
    return [(0.7, web), (0.3, code)]


def loaders(mixture: Mixture, world: int, **overrides: object) -> list[PackedTokenLoader]:
    return [BlendedTokenLoader(config(mixture[0][1], **overrides), mixture, rank, world) for rank in range(world)]


def samples_of(prefix: str, **overrides: object) -> set[tuple[int, ...]]:
    single = PackedTokenLoader(config(prefix, **overrides), 0, 1)
    return {tuple(single._samples.sample(i).tolist()) for i in range(single.num_samples)}


def test_a_one_dataset_mixture_is_the_plain_loader(mixture: Mixture) -> None:
    prefix = mixture[0][1]
    plain = global_stream([PackedTokenLoader(config(prefix), rank, 2) for rank in range(2)], steps=40)
    assert global_stream(loaders([(1.0, prefix)], 2), steps=40) == plain


def test_each_sample_comes_from_the_dataset_megatron_cores_blend_names(mixture: Mixture) -> None:
    stream = global_stream(loaders(mixture, 1, micro_batch_size=1), steps=300)
    datasets, _ = BlendIndex([0.7, 0.3]).lookup(np.arange(300))
    web, code = samples_of(mixture[0][1]), samples_of(mixture[1][1])
    origin = [0 if sample in web else 1 if sample in code else -1 for sample in stream]
    assert origin == datasets.tolist()
    assert abs(origin.count(0) - 210) <= 1  # 0.7 of 300
    # Within a dataset, its own epochs: every sample once before any repeats.
    code_stream = [sample for sample, source in zip(stream, origin, strict=True) if source == 1]
    assert sorted(code_stream[: len(code)]) == sorted(code)


def test_the_mixture_is_deterministic_and_seeded(mixture: Mixture) -> None:
    assert global_stream(loaders(mixture, 1, seed=7), steps=20) == global_stream(loaders(mixture, 1, seed=7), steps=20)
    assert global_stream(loaders(mixture, 1, seed=7), steps=20) != global_stream(loaders(mixture, 1, seed=8), steps=20)


def test_exact_resume_of_a_mixture_at_the_same_size(mixture: Mixture) -> None:
    uninterrupted = global_stream(loaders(mixture, 2), steps=60)
    first = loaders(mixture, 2)
    before = global_stream(first, steps=23)
    states = [loader.state_dict() for loader in first]
    assert states[0] == states[1] and states[0]["samples_consumed"] == 23 * 4
    assert sum(states[0]["dataset_samples_consumed"]) == 23 * 4
    resumed = loaders(mixture, 2)
    for loader in resumed:
        loader.load_state_dict(states[0])
    assert before + global_stream(resumed, steps=37) == uninterrupted


@pytest.mark.parametrize(("before_world", "after_world"), [(2, 1), (1, 2)])
def test_a_mixture_resumes_the_same_sample_stream_at_another_data_parallel_size(
    mixture: Mixture, before_world: int, after_world: int
) -> None:
    """Global batch 4 samples throughout: 2 ranks x 2, or 1 rank x 2 with two accumulation micro-steps."""

    def run(group: list[PackedTokenLoader], optimizer_steps: int) -> list[tuple[int, ...]]:
        return global_stream(group, steps=optimizer_steps * (4 // (2 * len(group))))

    uninterrupted = run(loaders(mixture, 2), 50)
    first = loaders(mixture, before_world)
    consumed = run(first, 19)
    state = first[0].state_dict()
    second = loaders(mixture, after_world)
    for loader in second:
        loader.load_state_dict(state)
    consumed += run(second, 50 - 19)
    assert consumed == uninterrupted


def test_a_state_of_another_mixture_is_refused(mixture: Mixture) -> None:
    first = loaders(mixture, 1)
    global_stream(first, steps=3)
    state = first[0].state_dict()
    reweighted = [(0.5, mixture[0][1]), (0.5, mixture[1][1])]
    with pytest.raises(ValueError, match=r"^loader state: datasets: .*weight.*0\.7.* does not match"):
        loaders(reweighted, 1)[0].load_state_dict(state)
    plain = PackedTokenLoader(config(mixture[0][1]), 0, 1)
    with pytest.raises(ValueError, match=r"^loader state: num_samples: missing"):
        plain.load_state_dict(state)
    bad = dict(state, dataset_samples_consumed=[6, 1])
    with pytest.raises(ValueError, match=r"dataset_samples_consumed: \[6, 1\] must be 2 counts adding up to"):
        loaders(mixture, 1)[0].load_state_dict(bad)


def test_datasets_of_different_tokenizers_are_refused(make_dataset: MakeDataset, mixture: Mixture) -> None:
    other = make_dataset(random_documents(24, seed=3), name="other", vocab_size=2000)
    with pytest.raises(
        DataError, match=r"other_text_document: vocab_size 2000 differs from .*web_text_document's 1000"
    ):
        loaders([mixture[0], (0.5, other)], 1)


@pytest.mark.parametrize("weight", [0, -1.0, "1", True])
def test_a_bad_weight_is_a_one_line_error(mixture: Mixture, weight: object) -> None:
    with pytest.raises(ValueError, match=rf"^datasets\[1\]\.weight: {weight!r} must be a number > 0"):
        loaders([mixture[0], (weight, mixture[1][1])], 1)  # type: ignore[list-item]


def test_validation_of_a_mixture_is_every_held_out_sample_of_each_dataset_once(mixture: Mixture) -> None:
    overrides = {"validation_fraction": 0.3, "micro_batch_size": 1}
    (validation,) = [BlendedTokenLoader(config(mixture[0][1], **overrides), mixture, 0, 1, split="validation")]
    expected = []
    for _, prefix in mixture:
        single = PackedTokenLoader(config(prefix, **overrides), 0, 1, split="validation")
        expected += [row for batch in single for row in rows(batch)]
    assert [row for batch in validation for row in rows(batch)] == expected
    assert [row for batch in validation for row in rows(batch)] == expected  # each pass from the start


def test_a_dataset_without_held_out_samples_still_validates_with_the_others(
    make_dataset: MakeDataset, mixture: Mixture
) -> None:
    # 20 one-token documents (2 tokens with the EOD): 1 held out is 2 tokens, shorter than one 9-token sample.
    tiny = make_dataset([np.array([7]) for _ in range(20)], name="tiny")
    overrides = {"validation_fraction": 0.05, "micro_batch_size": 1}
    held_out = PackedTokenLoader(config(tiny, **overrides), 0, 1, split="train")  # its train split is fine
    assert held_out.num_samples > 0
    with pytest.raises(DataError, match=r"the validation split .* shorter than one sample"):
        PackedTokenLoader(config(tiny, **overrides), 0, 1, split="validation")
    datasets = [(0.5, tiny), mixture[0]]  # the first without held-out samples
    validation = BlendedTokenLoader(config(mixture[0][1], **overrides), datasets, 0, 1, split="validation")
    single = PackedTokenLoader(config(mixture[0][1], **overrides), 0, 1, split="validation")
    assert [row for batch in validation for row in rows(batch)] == [row for batch in single for row in rows(batch)]
