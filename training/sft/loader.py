"""The loader for `data.kind: sft`: packed rows of whole samples, with the same stream, state and resume contract
as the pretraining loader (training/data/loader.py): epoch e is a seeded permutation of the split's rows, rank r
takes the r-th micro-batch of each global batch, and the state is the number of rows taken globally.

A batch is {"input_ids", "labels" (IGNORE_INDEX where untrained), "loss_mask" (labels != IGNORE_INDEX),
"position_ids" (from 0 at each sample), "document_ids" (the sample's index in its row)}, int64 [B, seq_len].
The split holds out whole samples (training.data.splits, the split `llm-prepare --sft` gives Bridge); the
samples of each split are shuffled once with the seed and packed first-fit (training/sft/packing.py).
"""

from __future__ import annotations

import threading
from collections.abc import Generator
from typing import Any

import numpy as np
import torch

from training.data.errors import DataError
from training.data.indexed import bin_path, idx_path, open_tokens, read_index
from training.data.loader import SPLITS, LoaderConfig
from training.data.manifest import FileRecord
from training.data.packing import epoch_order
from training.data.splits import split_documents
from training.data.verify import check_file_record, verify_dataset
from training.sft.packing import fill_row, first_fit
from training.sft.prepare import mask_prefix_for

STATE_VERSION = 1
_PACKING_STREAM = 0x5F7_0ACC
BATCH_KEYS = ("input_ids", "labels", "position_ids", "document_ids")


class SFTLoader:
    def __init__(self, config: LoaderConfig, dp_rank: int, dp_world_size: int, split: str = "train") -> None:
        if split not in SPLITS:
            raise ValueError(f"split: {split!r} must be one of {list(SPLITS)}")
        if not 0 <= dp_rank < dp_world_size:
            raise ValueError(f"dp_rank: {dp_rank!r} must be in [0, {dp_world_size})")
        self.config, self.dp_rank, self.dp_world_size, self.split = config, dp_rank, dp_world_size, split
        prefix = config.data_prefix
        self._manifest = verify_dataset(prefix, checksums=config.verify_checksums)
        mask_prefix = mask_prefix_for(prefix)
        records = self._manifest.extra.get("loss_mask")
        if self._manifest.extra.get("kind") != "sft" or not isinstance(records, dict):
            raise DataError(f"{prefix}.manifest.json: not an SFT dataset (write it with `llm-prepare --sft`)")
        for key, path in (("idx", idx_path(mask_prefix)), ("bin", bin_path(mask_prefix))):
            check_file_record(FileRecord(**records[key]), path, checksums=config.verify_checksums)
        index, mask_index = read_index(idx_path(prefix)), read_index(idx_path(mask_prefix))
        if not np.array_equal(index.sequence_lengths, mask_index.sequence_lengths):
            raise DataError(f"{idx_path(mask_prefix)}: sample lengths differ from {idx_path(prefix)}")
        self._tokens, self._masks = open_tokens(prefix, index), open_tokens(mask_prefix, mask_index)
        self._starts, ends = index.document_token_bounds()
        train, validation = split_documents(index.document_count, config.validation_fraction, config.seed)
        documents = train if split == "train" else validation
        positions = ends[documents] - self._starts[documents] - 1
        if documents.size and int(positions.max()) > config.seq_len:
            longest = int(np.argmax(positions))
            raise DataError(
                f"data.seq_len: {config.seq_len} is shorter than sample {int(documents[longest])} of {prefix} "
                f"({int(positions[longest])} positions); raise it, or prepare shorter rows (samples are never split)"
            )
        order = documents.copy()
        np.random.default_rng([config.seed, _PACKING_STREAM]).shuffle(order)
        self._rows = [order[row] for row in first_fit(ends[order] - self._starts[order] - 1, config.seq_len)]
        self._lengths = ends - self._starts
        if split == "validation" and len(self._rows) < self.global_batch_size:
            raise DataError(
                f"{prefix}: the validation split packs into {len(self._rows)} rows, fewer than one global batch of "
                f"{self.global_batch_size}; raise validation_fraction (now {config.validation_fraction})"
            )
        if not self._rows:
            raise DataError(f"{prefix}: the {split} split holds no sample")
        self._samples_consumed = 0
        self._active_stop: threading.Event | None = None

    @property
    def vocab_size(self) -> int:
        return self._manifest.vocab_size

    @property
    def eod_id(self) -> int:
        return self._manifest.eod_id

    @property
    def samples_consumed(self) -> int:
        """Rows taken by all data-parallel ranks together."""
        return self._samples_consumed

    @property
    def num_samples(self) -> int:
        """Packed rows in one epoch of this split."""
        return len(self._rows)

    @property
    def global_batch_size(self) -> int:
        return self.dp_world_size * self.config.micro_batch_size

    @property
    def epoch(self) -> int:
        return self._samples_consumed // self.num_samples

    def state_dict(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "kind": "sft",
            "samples_consumed": self._samples_consumed,
            "epoch": self.epoch,
            "split": self.split,
            "seq_len": self.config.seq_len,
            "seed": self.config.seed,
            "validation_fraction": self.config.validation_fraction,
            "num_samples": self.num_samples,
            "dataset_bin_sha256": self._manifest.bin.sha256,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        expected = self.state_dict()
        for key in ("version", "kind", "split", "seq_len", "seed", "validation_fraction", "num_samples"):
            if state.get(key) != expected[key]:
                raise ValueError(
                    f"loader state: {key}: {state.get(key)!r} does not match this loader's {expected[key]!r}"
                )
        if state.get("dataset_bin_sha256") != expected["dataset_bin_sha256"]:
            raise ValueError("loader state: dataset_bin_sha256: the checkpoint was trained on another dataset")
        consumed = state.get("samples_consumed")
        if isinstance(consumed, bool) or not isinstance(consumed, int) or consumed < 0:
            raise ValueError(f"loader state: samples_consumed: {consumed!r} must be an integer >= 0")
        self._stop_active_iterator()
        self._samples_consumed = consumed

    def __iter__(self) -> Generator[dict[str, torch.Tensor], None, None]:
        self._stop_active_iterator()
        stop = threading.Event()
        self._active_stop = stop
        if self.split == "validation":
            self._samples_consumed = 0
            return self._iterate(stop, self.num_samples // self.global_batch_size)
        return self._iterate(stop, None)

    def _iterate(self, stop: threading.Event, batches: int | None) -> Generator[dict[str, torch.Tensor], None, None]:
        done = 0
        while batches is None or done < batches:
            if stop.is_set():
                return
            first = self._samples_consumed + self.dp_rank * self.config.micro_batch_size
            rows = [self._row_at(position) for position in range(first, first + self.config.micro_batch_size)]
            batch = self._collate(rows)
            self._samples_consumed += self.global_batch_size
            done += 1
            yield batch

    def _row_at(self, position: int) -> np.ndarray:
        if self.split == "validation":
            return self._rows[position]
        epoch, offset = divmod(position, self.num_samples)
        return self._rows[int(epoch_order(self.num_samples, self.config.seed, epoch)[offset])]

    def _collate(self, rows: list[np.ndarray]) -> dict[str, torch.Tensor]:
        shape = (len(rows), self.config.seq_len)
        out = {key: np.empty(shape, dtype=np.int64) for key in BATCH_KEYS}
        for row, documents in enumerate(rows):
            samples = []
            for document in documents.tolist():
                start, length = int(self._starts[document]), int(self._lengths[document])
                samples.append((self._tokens[start : start + length], self._masks[start : start + length]))
            fill_row(samples, self.eod_id, out, row)
        batch = {key: torch.from_numpy(value) for key, value in out.items()}
        batch["loss_mask"] = batch["labels"] != -100
        if self.config.pin_memory:
            batch = {key: value.pin_memory() for key, value in batch.items()}
        return batch

    def _stop_active_iterator(self) -> None:
        if self._active_stop is not None:
            self._active_stop.set()
            self._active_stop = None
