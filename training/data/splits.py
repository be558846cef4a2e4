"""Which documents each split holds, and how many samples it yields: no torch, so `llm-submit` can tell on the head
node whether a dataset fills one sample of every split before a job is queued (launch.data_fit).

Our loader (training.data.loader) holds out seeded runs of whole documents for validation; a sample is seq_len + 1
tokens of the split's stream, consecutive samples sharing one token.
"""

import numpy as np

from training.data.errors import DataError
from training.data.indexed import idx_path, read_index

# Separates the validation draw from the per-epoch shuffles, which use seed + epoch.
_VALIDATION_STREAM = 0x5EED_7A11
_MAX_VALIDATION_RUN = 64
_MIN_VALIDATION_RUNS = 16


def split_documents(document_count: int, validation_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(train, validation) document ids, each sorted; the validation documents are seeded random runs.

    Documents are held out in runs of neighbours (up to _MAX_VALIDATION_RUN, at least 16 runs when there are
    enough documents): every held-out run splits the train stream, and each train sample that runs across such a
    gap is pieced together from both sides, which costs far more than a sample read in one piece. Runs also keep
    the spread over the corpus that a random draw gives.
    """
    if validation_fraction == 0.0:
        return np.arange(document_count, dtype=np.int64), np.zeros(0, dtype=np.int64)
    validation_count = max(1, round(validation_fraction * document_count))
    if validation_count >= document_count:
        raise DataError(
            f"validation_fraction: {validation_fraction} holds out {validation_count} of {document_count} documents, "
            "leaving none to train on"
        )
    rng = np.random.default_rng([seed, _VALIDATION_STREAM])
    run = min(_MAX_VALIDATION_RUN, max(1, validation_count // _MIN_VALIDATION_RUNS))
    runs = -(-validation_count // run)
    if runs > document_count // run:  # very large fractions: too few slots for whole runs
        run, runs = 1, validation_count
    slots = np.sort(rng.choice(document_count // run, size=runs, replace=False))
    held_out = (slots[:, None] * run + np.arange(run)).reshape(-1)[:validation_count]
    validation = np.sort(held_out).astype(np.int64)
    train = np.setdiff1d(np.arange(document_count, dtype=np.int64), validation, assume_unique=True)
    return train, validation


def samples_in(stream_tokens: int, seq_len: int) -> int:
    """Samples of seq_len + 1 tokens a stream of this many tokens yields (each sample's last token begins the next)."""
    return max(0, (stream_tokens - 1) // seq_len)


def split_tokens(data_prefix: str, validation_fraction: float, seed: int) -> dict[str, tuple[int, int]]:
    """(documents, tokens) of the train and validation splits our loader makes of a dataset."""
    index = read_index(idx_path(data_prefix))
    starts, ends = index.document_token_bounds()
    lengths = ends - starts
    train, validation = split_documents(index.document_count, validation_fraction, seed)
    return {
        "train": (len(train), int(lengths[train].sum())),
        "validation": (len(validation), int(lengths[validation].sum())),
    }
