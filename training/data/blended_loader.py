"""The loader of a data mixture: several prepared datasets, each sample drawn from one by weight.

Train: global stream position p is sample k of dataset d by megatron-core's blending rule (`training.data.blend`),
and k is a position in d's own endless stream (its epochs are permutations seeded with seed + epoch, as in the
single-dataset loader), so a one-dataset mixture is exactly `PackedTokenLoader`. Ranks, batches, read-ahead and
prefetch are the single-dataset loader's. The state adds each dataset's count at `samples_consumed`, which
resumes the blend exactly at any data-parallel size. Validation: one pass over every dataset's held-out
samples, dataset after dataset in the mixture's order, in file order.
"""

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from training.data.blend import BlendIndex, normalized
from training.data.errors import DataError
from training.data.indexed import idx_path, open_tokens, read_index
from training.data.loader import STATE_VERSION, LoaderConfig, PackedTokenLoader
from training.data.manifest import DatasetManifest
from training.data.packing import PackedSamples, Spans, epoch_order, split_documents
from training.data.verify import verify_dataset

BLEND_STATE_FIELDS = ("version", "split", "seq_len", "seed", "validation_fraction", "datasets")


class _MixtureSamples:
    """The datasets' splits behind one loader, gathered by global stream position."""

    def __init__(self, parts: list[PackedSamples], weights: list[float], split: str, seed: int) -> None:
        self.parts = parts
        self.split = split
        self.seed = seed
        self.blend = BlendIndex(weights)
        self.num_samples = sum(part.num_samples for part in parts)  # a nominal epoch: every sample once
        self._validation_starts = np.cumsum([0] + [part.num_samples for part in parts])
        self._orders: dict[tuple[int, int], np.ndarray] = {}

    @property
    def token_itemsize(self) -> int:
        return self.parts[0].token_itemsize

    @property
    def token_dtype(self) -> np.dtype:
        return self.parts[0].token_dtype

    def locate(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(dataset, sample id within that dataset's split) of each global stream position."""
        if self.split == "validation":
            datasets = np.searchsorted(self._validation_starts, positions, side="right") - 1
            return datasets, positions - self._validation_starts[datasets]
        datasets, stream_positions = self.blend.lookup(positions)
        ids = np.empty(positions.size, dtype=np.int64)
        for dataset in np.unique(datasets).tolist():
            where = datasets == dataset
            per_epoch = self.parts[dataset].num_samples
            epochs, offsets = np.divmod(stream_positions[where], per_epoch)
            chosen = np.empty(offsets.size, dtype=np.int64)
            for epoch in np.unique(epochs).tolist():
                in_epoch = epochs == epoch
                chosen[in_epoch] = self._epoch_order(dataset, epoch, per_epoch)[offsets[in_epoch]]
            ids[where] = chosen
        return datasets, ids

    def batch(self, positions: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        positions = np.asarray(positions, dtype=np.int64)
        if out is None:
            out = np.empty((positions.size, self.parts[0].seq_len + 1), dtype=self.token_dtype)
        datasets, ids = self.locate(positions)
        for dataset in np.unique(datasets).tolist():
            where = np.flatnonzero(datasets == dataset)
            out[where] = self.parts[dataset].batch(ids[where])
        return out

    def _epoch_order(self, dataset: int, epoch: int, per_epoch: int) -> np.ndarray:
        key = (dataset, epoch)
        order = self._orders.get(key)
        if order is None:
            # Each dataset keeps its current and next epoch: a batch spans at most an epoch boundary.
            for stale in [k for k in self._orders if k[0] == dataset and k[1] < epoch - 1]:
                del self._orders[stale]
            order = self._orders[key] = epoch_order(per_epoch, self.seed, epoch)
        return order


class BlendedTokenLoader(PackedTokenLoader):
    """`PackedTokenLoader`'s batches and contract over a mixture of `(weight, data_prefix)` datasets."""

    def __init__(
        self,
        config: LoaderConfig,
        datasets: Sequence[tuple[float, str]],
        dp_rank: int,
        dp_world_size: int,
        split: str = "train",
    ) -> None:
        self._check_placement(dp_rank, dp_world_size, split)
        if not datasets:
            raise ValueError("datasets: empty; a mixture needs at least one (weight, prefix)")
        for position, (weight, prefix) in enumerate(datasets):
            if isinstance(weight, bool) or not isinstance(weight, int | float) or not weight > 0:
                raise ValueError(f"datasets[{position}].weight: {weight!r} must be a number > 0 ({prefix})")
        self.config = config
        self.dp_rank = dp_rank
        self.dp_world_size = dp_world_size
        self.split = split
        self.datasets = [(float(weight), str(prefix)) for weight, prefix in datasets]
        manifests: list[DatasetManifest] = []
        parts: list[PackedSamples] = []
        for _, prefix in self.datasets:
            manifest = verify_dataset(prefix, checksums=config.verify_checksums)
            _check_same_tokens(manifests[0] if manifests else manifest, self.datasets[0][1], manifest, prefix)
            manifests.append(manifest)
            index = read_index(idx_path(prefix))
            train_docs, validation_docs = split_documents(index.document_count, config.validation_fraction, config.seed)
            documents = train_docs if split == "train" else validation_docs
            spans = Spans.for_documents(*index.document_token_bounds(), documents)
            samples = PackedSamples(open_tokens(prefix, index), spans, config.seq_len)
            # A dataset's validation part may be empty: the pass reads all of them (_check_validation_size).
            if samples.num_samples == 0 and split == "train":
                raise DataError(
                    f"{prefix}: the {split} split ({len(documents)} documents, {spans.total_tokens} tokens) is "
                    f"shorter than one sample of seq_len + 1 = {config.seq_len + 1} tokens"
                )
            parts.append(samples)
        self._manifest = manifests[0]
        self._manifests = manifests
        self._samples = _MixtureSamples(  # type: ignore[assignment]
            parts, [weight for weight, _ in self.datasets], split, config.seed
        )
        self._check_validation_size()
        self._samples_consumed = 0
        self._order_cache = None
        self._active_stop = None
        self._order_lock = threading.Lock()

    @property
    def weights(self) -> list[float]:
        """The normalized weights, as megatron-core's blend uses them."""
        return normalized([weight for weight, _ in self.datasets])

    def dataset_samples_consumed(self) -> list[int]:
        """Samples each dataset gave to the stream so far (all ranks together)."""
        if self.split == "validation":
            return [0] * len(self.datasets)
        return self._mixture.blend.counts_at(self._samples_consumed)

    @property
    def _mixture(self) -> _MixtureSamples:
        return self._samples  # type: ignore[return-value]

    def state_dict(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "samples_consumed": self._samples_consumed,
            "dataset_samples_consumed": self.dataset_samples_consumed(),
            "split": self.split,
            "seq_len": self.config.seq_len,
            "seed": self.config.seed,
            "validation_fraction": self.config.validation_fraction,
            "datasets": [
                {"weight": weight, "num_samples": part.num_samples, "bin_sha256": manifest.bin.sha256}
                for (weight, _), part, manifest in zip(self.datasets, self._mixture.parts, self._manifests, strict=True)
            ],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from a state saved at any data-parallel size; the datasets, weights and sampling must match."""
        expected = self.state_dict()
        for key in BLEND_STATE_FIELDS:
            if key not in state:
                raise ValueError(f"loader state: {key}: missing")
            if state[key] != expected[key]:
                raise ValueError(f"loader state: {key}: {state[key]!r} does not match this loader's {expected[key]!r}")
        consumed = state.get("samples_consumed")
        if isinstance(consumed, bool) or not isinstance(consumed, int) or consumed < 0:
            raise ValueError(f"loader state: samples_consumed: {consumed!r} must be an integer >= 0")
        counts = state.get("dataset_samples_consumed")
        if (
            not isinstance(counts, list)
            or len(counts) != len(self.datasets)
            or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts)
            or sum(counts) != consumed
        ):
            raise ValueError(
                f"loader state: dataset_samples_consumed: {counts!r} must be {len(self.datasets)} counts adding up "
                f"to samples_consumed {consumed}"
            )
        self._stop_active_iterator()
        if self.split == "train":
            self._mixture.blend = BlendIndex([weight for weight, _ in self.datasets], consumed, counts)
        self._samples_consumed = consumed

    def _sample_ids(self, first: int, count: int) -> np.ndarray:
        """Global stream positions: the mixture's batch() maps them to datasets and samples."""
        return np.arange(first, first + count, dtype=np.int64)


def _check_same_tokens(first: DatasetManifest, first_prefix: str, other: DatasetManifest, prefix: str) -> None:
    """A mixture trains one vocabulary: every dataset must come from the same tokenizer, with the same EOD."""
    for field in ("tokenizer_sha256", "vocab_size", "eod_id", "dtype"):
        if getattr(other, field) != getattr(first, field):
            raise DataError(
                f"{prefix}: {field} {getattr(other, field)!r} differs from {first_prefix}'s "
                f"{getattr(first, field)!r}; every dataset of a mixture must be prepared with the same tokenizer"
            )
