"""The loader the trainer uses: packed fixed-length samples from a prepared dataset, resumable at any DP size.

The global sample stream is one sequence for all data-parallel ranks: epoch e is a permutation of the split's
samples seeded with seed + e, and epochs follow each other. Each step the ranks together take the next
dp_world_size * micro_batch_size samples, rank r the r-th slice of micro_batch_size. The state is the number of
samples taken globally, the same on every rank, so resuming is exact at any data-parallel size that keeps the
global batch (the trainer keeps it with gradient accumulation).
"""

import itertools
import threading
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from training.data.errors import DataError
from training.data.indexed import idx_path, open_tokens, read_index
from training.data.packing import PackedSamples, Spans, epoch_order, split_documents
from training.data.prefetch import prefetched
from training.data.verify import verify_dataset

SPLITS = ("train", "validation")
STATE_VERSION = 2  # 2: validation documents held out in runs (packing.split_documents)
# Samples are gathered for many batches at once because each gather has a fixed cost that does not depend on
# its size: Python bookkeeping, waking torch's intra-op worker thread, and warming the TLB over the file's
# mapping again after the widening in between has evicted it. On the 2-core bench VM that was about 0.2-0.35 ms
# per gather; at 16 batches per gather it was a third of the loader's time, at 256 it is lost in the noise
# (docs/benchmarks.md). The ring of chunk buffers is (prefetch + 2) x at most READ_AHEAD_BYTES per loader.
READ_AHEAD_BATCHES = 256
READ_AHEAD_BYTES = 16 << 20


@dataclass(frozen=True)
class LoaderConfig:
    data_prefix: str  # path prefix of the .bin/.idx (without extension)
    seq_len: int
    micro_batch_size: int
    seed: int = 1234
    validation_fraction: float = 0.01  # held-out split by whole documents, deterministic from seed
    prefetch: int = 2  # read-ahead chunks (up to 256 batches each) prepared by a background thread (0: no thread)
    verify_checksums: bool = False
    # Batches widened straight into page-locked memory (torch's caching host allocator) for asynchronous copies
    # to a CUDA device; the trainer sets it when its device is CUDA. Needs an accelerator build of torch.
    pin_memory: bool = False

    def __post_init__(self) -> None:
        for name in ("seq_len", "micro_batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"LoaderConfig.{name}: {value!r} must be an integer >= 1")
        if isinstance(self.prefetch, bool) or not isinstance(self.prefetch, int) or self.prefetch < 0:
            raise ValueError(f"LoaderConfig.prefetch: {self.prefetch!r} must be an integer >= 0")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"LoaderConfig.seed: {self.seed!r} must be an integer >= 0")
        if not 0.0 <= self.validation_fraction < 1.0:
            raise ValueError(f"LoaderConfig.validation_fraction: {self.validation_fraction!r} must be in [0, 1)")


class PackedTokenLoader:
    """Yields {"tokens": LongTensor[B, S + 1], "input_ids": tokens[:, :-1], "labels": tokens[:, 1:]} for one
    data-parallel rank (see `collate`).

    The train split is endless (epoch after epoch); the validation split is one pass over the held-out documents
    in file order, from the start on every `iter()`, dropping the last incomplete global batch.
    Only one iterator is live at a time: a new `iter()` or `load_state_dict()` stops the previous one.
    """

    def __init__(self, config: LoaderConfig, dp_rank: int, dp_world_size: int, split: str = "train") -> None:
        self._check_placement(dp_rank, dp_world_size, split)
        self.config = config
        self.dp_rank = dp_rank
        self.dp_world_size = dp_world_size
        self.split = split
        self._manifest = verify_dataset(config.data_prefix, checksums=config.verify_checksums)
        index = read_index(idx_path(config.data_prefix))
        tokens = open_tokens(config.data_prefix, index)
        train_docs, validation_docs = split_documents(index.document_count, config.validation_fraction, config.seed)
        documents = train_docs if split == "train" else validation_docs
        spans = Spans.for_documents(*index.document_token_bounds(), documents)
        self._samples = PackedSamples(tokens, spans, config.seq_len)
        if self._samples.num_samples == 0:
            raise DataError(
                f"{config.data_prefix}: the {split} split ({len(documents)} documents, {spans.total_tokens} tokens) "
                f"is shorter than one sample of seq_len + 1 = {config.seq_len + 1} tokens"
            )
        self._check_validation_size()
        self._samples_consumed = 0
        self._order_cache: tuple[int, np.ndarray] | None = None
        self._order_lock = threading.Lock()
        self._active_stop: threading.Event | None = None

    @staticmethod
    def _check_placement(dp_rank: int, dp_world_size: int, split: str) -> None:
        if isinstance(dp_world_size, bool) or not isinstance(dp_world_size, int) or dp_world_size < 1:
            raise ValueError(f"dp_world_size: {dp_world_size!r} must be an integer >= 1")
        if isinstance(dp_rank, bool) or not isinstance(dp_rank, int) or not 0 <= dp_rank < dp_world_size:
            raise ValueError(f"dp_rank: {dp_rank!r} must be an integer in [0, {dp_world_size})")
        if split not in SPLITS:
            raise ValueError(f"split: {split!r} must be one of {list(SPLITS)}")

    def _check_validation_size(self) -> None:
        if self.split == "validation" and self._samples.num_samples < self.global_batch_size:
            raise DataError(
                f"{self.config.data_prefix}: the validation split has {self._samples.num_samples} samples, fewer "
                f"than one global batch of {self.global_batch_size}; raise validation_fraction "
                f"(now {self.config.validation_fraction})"
            )

    # -- properties the trainer reads ---------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        return self._manifest.vocab_size

    @property
    def eod_id(self) -> int:
        return self._manifest.eod_id

    @property
    def samples_consumed(self) -> int:
        """Samples taken by all data-parallel ranks together (identical on every rank)."""
        return self._samples_consumed

    @property
    def num_samples(self) -> int:
        """Samples in one epoch of this split."""
        return self._samples.num_samples

    @property
    def global_batch_size(self) -> int:
        return self.dp_world_size * self.config.micro_batch_size

    @property
    def epoch(self) -> int:
        return self._samples_consumed // self._samples.num_samples

    # -- state ---------------------------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Counts batches handed to the trainer, never those only prefetched."""
        return {
            "version": STATE_VERSION,
            "samples_consumed": self._samples_consumed,
            "epoch": self.epoch,
            "split": self.split,
            "seq_len": self.config.seq_len,
            "seed": self.config.seed,
            "validation_fraction": self.config.validation_fraction,
            "num_samples": self._samples.num_samples,
            "dataset_bin_sha256": self._manifest.bin.sha256,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from a state saved at any data-parallel size; the dataset, split and sampling must match."""
        expected = self.state_dict()
        for key in ("version", "split", "seq_len", "seed", "validation_fraction", "num_samples", "dataset_bin_sha256"):
            if key not in state:
                raise ValueError(f"loader state: {key}: missing")
            if state[key] != expected[key]:
                raise ValueError(f"loader state: {key}: {state[key]!r} does not match this loader's {expected[key]!r}")
        consumed = state.get("samples_consumed")
        if isinstance(consumed, bool) or not isinstance(consumed, int) or consumed < 0:
            raise ValueError(f"loader state: samples_consumed: {consumed!r} must be an integer >= 0")
        if state.get("epoch") != consumed // self._samples.num_samples:
            raise ValueError(
                f"loader state: epoch: {state.get('epoch')!r} does not match samples_consumed {consumed} "
                f"with {self._samples.num_samples} samples per epoch"
            )
        self._stop_active_iterator()
        self._samples_consumed = consumed

    # -- iteration -----------------------------------------------------------------------------------------------

    def __iter__(self) -> Generator[dict[str, torch.Tensor], None, None]:
        self._stop_active_iterator()
        stop = threading.Event()
        self._active_stop = stop
        if self.split == "validation":
            self._samples_consumed = 0
            batch_count: int | None = self._samples.num_samples // self.global_batch_size
        else:
            batch_count = None
        return self._iterate(self._samples_consumed, batch_count, stop)

    def _iterate(
        self, start: int, batch_count: int | None, stop: threading.Event
    ) -> Generator[dict[str, torch.Tensor], None, None]:
        chunks = self._read_aheads(start, batch_count)
        pin = self.config.pin_memory
        if self.config.prefetch:
            # Whole read-ahead chunks cross the thread boundary, so the two threads meet once per chunk of
            # batches, not per batch: on a busy machine each hand-over costs as much as building a batch.
            chunks = prefetched(chunks, self.config.prefetch, stop, f"packed-token-prefetch-rank{self.dp_rank}")
        try:
            for chunk in chunks:
                # This loop runs once per batch: no generator, property or method call that it can do without.
                windows, micro, step = chunk.windows, chunk.micro_batch_size, chunk.step
                consumed = chunk.first_position
                for row in range(0, chunk.batches * micro, micro):
                    if stop.is_set():
                        return
                    batch = collate(windows[row : row + micro], pin)
                    consumed += step
                    self._samples_consumed = consumed
                    yield batch
        finally:
            stop.set()
            chunks.close()

    def _read_aheads(self, start: int, batch_count: int | None) -> Generator["_ReadAhead", None, None]:
        """Consecutive read-ahead chunks from stream position `start`, `batch_count` batches in all (None: endless).
        The prefetch thread runs this part (it is what may wait for the disk)."""
        # A ring of gather buffers, reused: fresh memory each chunk would be faulted in page by page (and freed by
        # another thread than the one that allocated it). The consumer is done with a chunk before it takes the
        # next, so the chunks in the prefetch buffer, the one being consumed and the one being gathered suffice.
        ring = [
            np.empty(
                (self._chunk_batches * self.config.micro_batch_size, self.config.seq_len + 1), self._samples.token_dtype
            )
            for _ in range(self.config.prefetch + 2)
        ]
        position, remaining = start, batch_count
        for count in itertools.count():
            if remaining is not None and remaining <= 0:
                return
            chunk = self._gather_ahead(position, remaining, ring[count % len(ring)])
            yield chunk
            position += chunk.batches * self.global_batch_size
            if remaining is not None:
                remaining -= chunk.batches

    @property
    def _chunk_batches(self) -> int:
        return read_ahead_batches(
            self.config.micro_batch_size * (self.config.seq_len + 1) * self._samples.token_itemsize
        )

    def _gather_ahead(self, position: int, at_most: int | None, buffer: np.ndarray | None = None) -> "_ReadAhead":
        """This rank's samples of the next few global batches from `position`, gathered in one call (into `buffer`,
        [at least the chunk's rows, seq_len + 1] of the stored dtype, when given)."""
        micro, step = self.config.micro_batch_size, self.global_batch_size
        batches = self._chunk_batches
        if at_most is not None:  # the validation pass: never past its last complete global batch
            batches = min(batches, at_most)
        first = position + self.dp_rank * micro
        if step == micro:  # one rank: the batches' samples are one run of stream positions
            ids = self._sample_ids(first, batches * micro)
        else:
            ids = np.concatenate([self._sample_ids(first + batch * step, micro) for batch in range(batches)])
        out = buffer[: len(ids)] if buffer is not None else None
        return _ReadAhead(position, step, batches, micro, self._samples.batch(ids, out))

    def _sample_ids(self, first: int, count: int) -> np.ndarray:
        """Sample ids at global stream positions first .. first + count - 1."""
        if self.split == "validation":
            return np.arange(first, first + count, dtype=np.int64)
        per_epoch = self._samples.num_samples
        epoch, offset = divmod(first, per_epoch)
        if offset + count <= per_epoch:  # the common case: a slice of one epoch's permutation
            return self._epoch_order(epoch)[offset : offset + count]
        epochs, offsets = np.divmod(np.arange(first, first + count, dtype=np.int64), per_epoch)
        ids = np.empty(count, dtype=np.int64)
        for each in range(int(epochs[0]), int(epochs[-1]) + 1):
            in_epoch = epochs == each
            ids[in_epoch] = self._epoch_order(each)[offsets[in_epoch]]
        return ids

    def _epoch_order(self, epoch: int) -> np.ndarray:
        with self._order_lock:
            if self._order_cache is None or self._order_cache[0] != epoch:
                self._order_cache = (epoch, epoch_order(self._samples.num_samples, self.config.seed, epoch))
            return self._order_cache[1]

    def _stop_active_iterator(self) -> None:
        if self._active_stop is not None:
            self._active_stop.set()
            self._active_stop = None


@dataclass(frozen=True)
class _ReadAhead:
    """One rank's gathered windows for `batches` consecutive global batches from `first_position`."""

    first_position: int
    step: int  # the global batch size: consecutive batches start this far apart in the stream
    batches: int
    micro_batch_size: int
    windows: np.ndarray  # [batches * micro_batch_size, seq_len + 1], stored dtype


def read_ahead_batches(batch_bytes: int) -> int:
    """Batches gathered per read-ahead chunk, for batches of `batch_bytes` stored bytes."""
    return max(1, min(READ_AHEAD_BATCHES, READ_AHEAD_BYTES // batch_bytes))


def collate(windows: np.ndarray, pin_memory: bool = False) -> dict[str, torch.Tensor]:
    """One widening copy from the stored dtype into an int64 [B, seq_len + 1] `tokens` tensor; `input_ids` and
    `labels` are its first and last seq_len columns (views, no copy). Moving `tokens` to the device and slicing
    there moves each token once. Done by the consumer: memory allocated in the thread that also frees it is
    reused by the allocator instead of being returned to the system and faulted in again batch after batch
    (glibc's per-thread arenas), and it is cache-warm for the step. With `pin_memory` the int64 tensor is
    page-locked (torch's caching host allocator reuses its blocks once their copies are done), so the copy to
    the GPU is asynchronous and no second, pinning copy is made."""
    if pin_memory:
        pinned = torch.empty(windows.shape, dtype=torch.int64, pin_memory=True)
        np.copyto(pinned.numpy(), windows)
        return batch_of(pinned)
    tokens = np.empty(windows.shape, dtype=np.int64)
    np.copyto(tokens, windows)
    return batch_of(torch.from_numpy(tokens))


def batch_of(tokens: torch.Tensor) -> dict[str, torch.Tensor]:
    """The batch dict for [B, seq_len + 1] token ids (on any device): tokens, input_ids and labels (views)."""
    seq_len = tokens.shape[1] - 1
    return {"tokens": tokens, "input_ids": tokens.narrow(1, 0, seq_len), "labels": tokens.narrow(1, 1, seq_len)}
