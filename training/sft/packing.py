"""First-fit packing of whole SFT samples into rows of seq_len positions, and the arrays of one packed row.

A sample of n tokens (its EOD included) gives n - 1 positions: inputs tokens[:-1], labels tokens[1:]. Samples are
never split; a row's leftover positions are padding (EOD inputs, no labels, a document of their own). First fit
looks at the WINDOW most recently opened rows only, so packing costs O(samples x WINDOW) however many rows there
are; on the demo set it fills rows as full as unbounded first fit does.
"""

from __future__ import annotations

import numpy as np

from training.data.errors import DataError
from training.models.loss import IGNORE_INDEX

WINDOW = 64


def first_fit(lengths: np.ndarray, capacity: int, window: int = WINDOW) -> list[np.ndarray]:
    """Indices into `lengths` per row, in the order given; each row's lengths sum to at most `capacity`."""
    rows: list[list[int]] = []
    open_rows: list[int] = []  # indices into rows, oldest first
    free: list[int] = []
    for sample, length in enumerate(lengths.tolist()):
        if length > capacity:
            raise DataError(f"sample {sample}: {length} positions exceed data.seq_len {capacity}")
        for slot, room in enumerate(free):
            if room >= length:
                rows[open_rows[slot]].append(sample)
                free[slot] -= length
                break
        else:
            rows.append([sample])
            open_rows.append(len(rows) - 1)
            free.append(capacity - length)
            if len(open_rows) > window:
                open_rows.pop(0)
                free.pop(0)
    return [np.asarray(row, dtype=np.int64) for row in rows]


def fill_row(samples: list[tuple[np.ndarray, np.ndarray]], pad_id: int, out: dict[str, np.ndarray], row: int) -> None:
    """Write one row's samples ((tokens, mask) pairs) into row `row` of the batch arrays in `out`."""
    cursor = 0
    for document, (tokens, mask) in enumerate(samples):
        end = cursor + tokens.size - 1
        out["input_ids"][row, cursor:end] = tokens[:-1]
        out["labels"][row, cursor:end] = np.where(mask[1:] != 0, tokens[1:], IGNORE_INDEX)
        out["position_ids"][row, cursor:end] = np.arange(end - cursor)
        out["document_ids"][row, cursor:end] = document
        cursor = end
    seq_len = out["input_ids"].shape[1]
    out["input_ids"][row, cursor:] = pad_id
    out["labels"][row, cursor:] = IGNORE_INDEX
    out["position_ids"][row, cursor:] = np.arange(seq_len - cursor)
    out["document_ids"][row, cursor:] = len(samples)
