"""Pack whole documents into one token stream and cut it into fixed-length training samples.

A split (train or validation) is a set of whole documents. Its stream is those documents' tokens in file order,
EOD ids included as written; consecutive documents that sit next to each other in the .bin form one span, so a
split costs one entry per run of neighbouring documents rather than per document.
Sample i covers stream tokens [i * seq_len, i * seq_len + seq_len + 1): inputs are the first seq_len tokens and
labels the last seq_len, so every token after the first is a label exactly once.
"""

import warnings
from bisect import bisect_right
from dataclasses import dataclass

import numpy as np
import torch

from training.data.splits import samples_in, split_documents

__all__ = ["PackedSamples", "Spans", "epoch_order", "split_documents"]


@dataclass(frozen=True)
class Spans:
    """Token ranges of the .bin that, concatenated, make a split's stream."""

    starts: np.ndarray  # int64 token offsets into the .bin
    stream_offsets: np.ndarray  # int64, len(starts) + 1: where each span begins in the stream, then the total

    @property
    def total_tokens(self) -> int:
        return int(self.stream_offsets[-1])

    @classmethod
    def for_documents(cls, document_starts: np.ndarray, document_ends: np.ndarray, documents: np.ndarray) -> "Spans":
        starts = document_starts[documents]
        ends = document_ends[documents]
        keep = ends > starts
        starts, ends = starts[keep], ends[keep]
        if len(starts) == 0:
            return cls(np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64))
        # A document that starts where the previous one ended continues the same span.
        new_span = np.ones(len(starts), dtype=bool)
        new_span[1:] = starts[1:] != ends[:-1]
        span_starts = starts[new_span]
        span_ends = ends[np.append(np.flatnonzero(new_span)[1:] - 1, len(ends) - 1)]
        offsets = np.zeros(len(span_starts) + 1, dtype=np.int64)
        np.cumsum(span_ends - span_starts, out=offsets[1:])
        return cls(span_starts.astype(np.int64), offsets)


class PackedSamples:
    """Random access to the fixed-length samples of one split; reads only the tokens asked for."""

    def __init__(self, tokens: np.ndarray, spans: Spans, seq_len: int) -> None:
        self._tokens = tokens.view(np.ndarray)  # plain views: slicing a memmap object costs microseconds
        self._spans = spans
        self.seq_len = seq_len
        self.num_samples = samples_in(spans.total_tokens, seq_len)
        window = seq_len + 1
        # Every window of seq_len + 1 tokens in the file as a strided view (no copy): a batch is then one
        # index_select of the rows where its samples start. torch rather than numpy fancy indexing because torch
        # releases the GIL while it copies, so a prefetch thread gathers while the trainer's thread runs.
        self._windows = _torch_windows(self._tokens, window) if tokens.size >= window else None
        self._file_starts, self._crosses_spans = _sample_file_starts(spans, seq_len, self.num_samples)
        self._span_bounds = (spans.stream_offsets.tolist(), spans.starts.tolist())

    @property
    def token_itemsize(self) -> int:
        """Bytes per stored token id."""
        return self._tokens.dtype.itemsize

    @property
    def token_dtype(self) -> np.dtype:
        return self._tokens.dtype

    def sample(self, index: int) -> np.ndarray:
        """seq_len + 1 token ids (int64) of sample `index`."""
        if not 0 <= index < self.num_samples:
            raise IndexError(f"sample {index} outside 0..{self.num_samples - 1}")
        out = np.empty(self.seq_len + 1, dtype=np.int64)
        self._copy_sample(index, out)
        return out

    def batch(self, indices: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """[len(indices), seq_len + 1] token ids as stored in the .bin (uint16 or int32): the samples `indices`,
        written into `out` (that shape and dtype) when given, so that a caller can reuse its buffers."""
        indices = np.asarray(indices)
        if indices.dtype.kind != "u" and indices.size and int(indices.min()) < 0:
            raise IndexError(f"sample {int(indices.min())} outside 0..{self.num_samples - 1}")
        try:
            starts = self._file_starts[indices]
        except IndexError:
            raise IndexError(f"sample {int(indices.max())} outside 0..{self.num_samples - 1}") from None
        shape = (len(indices), self.seq_len + 1)
        if out is None:
            out = np.empty(shape, dtype=self._tokens.dtype)
        elif out.shape != shape or out.dtype != self._tokens.dtype:
            raise ValueError(f"out: {out.dtype}{list(out.shape)} must be {self._tokens.dtype}{list(shape)}")
        if self._windows is None or indices.size == 0:
            return out
        rows = torch.from_numpy(out.view(np.int16) if out.dtype == np.uint16 else out)
        torch.index_select(self._windows, 0, torch.from_numpy(starts.astype(np.int64, copy=False)), out=rows)
        # A sample that runs into the next span starts right in the file but continues with tokens of the
        # held-out documents that follow its span; those rows are rewritten piece by piece.
        crossing = self._crosses_spans[indices]
        if crossing.any():
            for row in np.flatnonzero(crossing).tolist():
                self._copy_sample(int(indices[row]), out[row])
        return out

    def _copy_sample(self, index: int, out: np.ndarray) -> None:
        """Write sample `index` into `out` piece by piece, one piece per span it touches."""
        offsets, file_starts = self._span_bounds
        begin = index * self.seq_len
        span = bisect_right(offsets, begin) - 1
        written = 0
        while written < out.size:
            take_from = begin + written - offsets[span]
            count = min(offsets[span + 1] - offsets[span] - take_from, out.size - written)
            file_start = file_starts[span] + take_from
            out[written : written + count] = self._tokens[file_start : file_start + count]
            written += count
            span += 1


def _torch_windows(tokens: np.ndarray, window: int) -> torch.Tensor:
    """[tokens - window + 1, window] overlapping rows over the token array, as a torch view (no copy).

    uint16 ids travel as int16 (the same bits; torch indexes few unsigned types) and are viewed back as uint16."""
    same_bits = tokens.view(np.int16) if tokens.dtype == np.uint16 else tokens
    with warnings.catch_warnings():  # the mapping is read-only and is only ever read
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        flat = torch.from_numpy(same_bits)
    return flat.as_strided((flat.numel() - window + 1, window), (1, 1))


def _sample_file_starts(spans: Spans, seq_len: int, num_samples: int) -> tuple[np.ndarray, np.ndarray]:
    """(where each sample's first token sits in the .bin, whether the sample runs into the next span).

    Offsets are uint32 (4 bytes per sample, what the epoch permutation costs) while they fit. A sample that
    crosses into the next span still has all seq_len + 1 tokens in the file after its start: the spans after its
    own hold the rest, and they lie further on in the file.
    """
    begins = np.arange(num_samples, dtype=np.int64) * seq_len
    offsets = spans.stream_offsets
    span = np.searchsorted(offsets, begins, side="right") - 1
    starts = spans.starts[span] + (begins - offsets[span])
    crosses = begins + (seq_len + 1) > offsets[span + 1]
    fits_uint32 = num_samples == 0 or int(starts[-1]) < np.iinfo(np.uint32).max
    return starts.astype(np.uint32 if fits_uint32 else np.int64), crosses


def epoch_order(num_samples: int, seed: int, epoch: int) -> np.ndarray:
    """The epoch's sample permutation, seeded by seed + epoch; 4 bytes per sample below 2**32 samples."""
    dtype = np.uint32 if num_samples < 2**32 else np.uint64
    order = np.arange(num_samples, dtype=dtype)
    np.random.default_rng(seed + epoch).shuffle(order)
    return order
