"""Does the dataset fill one sample of every split the job reads? Checked at submission: such a job died at start.

Our trainer's loader holds out seeded runs of whole documents (training.data.splits). Megatron (NeMo, Megatron
Bridge, NxDT) cuts the documents into contiguous ranges by the split weights launch.nemo.validation_split renders:
the weights normalized into book-ends (lo_i, hi_i), split i holding documents [round(lo_i x N), round(hi_i x N))
(megatron.core.datasets: blended_megatron_dataset_config.convert_split_vector_to_split_matrix and the builder's
rounding; tests/launch/test_data_fit.py runs megatron-core's own functions in .bridge-venv against these ranges).
Either way a sample is data.seq_len + 1 tokens of a split's stream.
"""

from __future__ import annotations

from itertools import accumulate

from launch.nemo import validation_split
from slurm.backends import backend_named
from slurm.errors import SubmitError
from training.config import JobConfig
from training.data.errors import DataError
from training.data.indexed import idx_path, read_index
from training.data.splits import samples_in, split_tokens

SPLIT_NAMES = ("train", "validation", "test")


def megatron_document_ranges(split: str, documents: int) -> dict[str, tuple[int, int]]:
    """[first, last) documents of each split with a weight, as Megatron's dataset builder cuts N documents."""
    weights = [float(weight) for weight in split.split(",")]
    total = sum(weights)
    bounds = [0.0, *accumulate(weight / total for weight in weights)]
    return {
        name: (round(low * documents), round(high * documents))
        for name, weight, low, high in zip(SPLIT_NAMES, weights, bounds, bounds[1:], strict=False)
        if weight > 0
    }


def megatron_split_tokens(data_prefix: str, split: str) -> dict[str, tuple[int, int]]:
    """(documents, tokens) of each split with a weight."""
    index = read_index(idx_path(data_prefix))
    starts, ends = index.document_token_bounds()
    lengths = ends - starts
    return {
        name: (last - first, int(lengths[first:last].sum()))
        for name, (first, last) in megatron_document_ranges(split, index.document_count).items()
    }


def check_data_fills_splits(
    backend: str,
    job: JobConfig,
    data_prefix: str,
    data_parallel: int,
    field: str = "--data-prefix",
    in_mixture: bool = False,
) -> None:
    """Raises SubmitError (one line naming the split, its size and the sample length) when a split the job reads
    cannot give it one sample, or, for our trainer's validation, one evaluation batch (data_parallel x micro-batch).
    `backend`: a slurm.backends name or --backend option; its data_splits say how the job cuts the data. `field`:
    what the message names (a mixture's `--model: data.datasets[i].prefix`). `in_mixture`: our trainer's validation
    pass reads every dataset of the mixture in turn, so one dataset's held-out part may be short or empty
    (check_mixture_fills_validation counts them together)."""
    seq_len = job.data.seq_len
    trainer = backend_named(backend).data_splits == "trainer"
    try:
        if trainer:
            counts = split_tokens(data_prefix, job.data.validation_fraction, job.data.seed)
            if not job.train.eval_every or in_mixture:
                counts.pop("validation")  # read only when the job evaluates; a mixture's: all datasets together
        else:
            counts = megatron_split_tokens(data_prefix, validation_split(job.data.validation_fraction))
    except DataError as error:
        raise SubmitError(f"{field}: {data_prefix}: {error}") from None
    for split, (documents, tokens) in counts.items():
        samples = samples_in(tokens, seq_len)
        if samples == 0:
            raise SubmitError(
                f"{field}: {data_prefix}: the {split} split ({documents} documents, {tokens} tokens) is shorter "
                f"than one sample of data.seq_len + 1 = {seq_len + 1} tokens; prepare more data, lower data.seq_len "
                f"or raise data.validation_fraction"
            )
        batch = data_parallel * job.data.micro_batch_size
        if trainer and split == "validation" and samples < batch:
            raise SubmitError(
                f"{field}: {data_prefix}: the validation split has {samples} samples, fewer than one evaluation "
                f"batch of {batch} (data-parallel size x micro-batch); raise data.validation_fraction "
                f"(now {job.data.validation_fraction})"
            )


def check_mixture_fills_validation(backend: str, job: JobConfig, data_parallel: int) -> None:
    """Our trainer's validation pass over a mixture reads every dataset's held-out samples in turn: together they
    must fill one evaluation batch (data_parallel x micro-batch). Megatron's backends cut each dataset alone
    (check_data_fills_splits)."""
    if backend_named(backend).data_splits != "trainer" or not job.train.eval_every:
        return
    samples = 0
    for prefix in job.data.prefixes:
        documents_tokens = split_tokens(prefix, job.data.validation_fraction, job.data.seed)["validation"]
        samples += samples_in(documents_tokens[1], job.data.seq_len)
    batch = data_parallel * job.data.micro_batch_size
    if samples < batch:
        raise SubmitError(
            f"--model: data.datasets: the validation splits hold {samples} samples in all, fewer than one evaluation "
            f"batch of {batch} (data-parallel size x micro-batch); raise data.validation_fraction "
            f"(now {job.data.validation_fraction})"
        )
