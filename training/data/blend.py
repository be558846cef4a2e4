"""Which dataset each sample of a mixture comes from: megatron-core's blending rule, resumable at any position.

Sample p of the global stream comes from the dataset whose count lags its share the most,
argmax_d(weight_d * max(p, 1) - taken_d) with the first dataset winning ties, and is that dataset's next sample
(`taken_d` before it is counted). This is megatron-core's `build_blending_indices` (BlendedDataset) sample for
sample, but endless: the rule needs only the position and the counts so far, so a loader resumes from
(samples_consumed, per-dataset counts) without replaying the stream, and the counts are the same at any
data-parallel size because the position is global.
"""

import threading
from dataclasses import dataclass

import numpy as np

# Positions per computed block: the rule is sequential (a Python loop, about a microsecond a sample), so a block
# costs tens of milliseconds, once per 65,536 samples (hundreds of optimizer steps).
BLOCK_SAMPLES = 1 << 16


def normalized(weights: list[float]) -> list[float]:
    """Weights summing to 1, computed as megatron-core's `normalize` does (float64), so ties break alike."""
    array = np.array(weights, dtype=np.float64)
    return (array / np.sum(array)).tolist()


def blend_block(
    weights: list[float], first_position: int, counts: list[int], size: int
) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """(dataset index, that dataset's sample index) of positions first_position .. + size - 1, given the samples
    each dataset gave before first_position; and the counts after the block."""
    taken = list(counts)
    datasets = np.empty(size, dtype=np.int16)
    samples = np.empty(size, dtype=np.int64)
    candidates = range(1, len(weights))
    for offset in range(size):
        scale = max(float(first_position + offset), 1.0)
        best, best_error = 0, weights[0] * scale - taken[0]
        for each in candidates:
            error = weights[each] * scale - taken[each]
            if error > best_error:
                best, best_error = each, error
        datasets[offset] = best
        samples[offset] = taken[best]
        taken[best] += 1
    return datasets, samples, taken


@dataclass(frozen=True)
class _Block:
    first_position: int
    counts: list[int]  # samples each dataset gave before first_position
    datasets: np.ndarray
    samples: np.ndarray


class BlendIndex:
    """The blend from an anchor (a position and the counts there) onwards, computed block by block on demand.

    Positions before the anchor are not known (a resumed loader never goes back), so asking for one raises.
    """

    def __init__(self, weights: list[float], anchor_position: int = 0, anchor_counts: list[int] | None = None) -> None:
        self.weights = normalized(weights)
        counts = list(anchor_counts) if anchor_counts is not None else [0] * len(weights)
        if len(counts) != len(weights) or sum(counts) != anchor_position or min(counts) < 0:
            raise ValueError(
                f"counts {counts} do not add up to position {anchor_position} over {len(weights)} datasets"
            )
        self.anchor_position = anchor_position
        self._block_counts: dict[int, list[int]] = {0: counts}  # block number -> counts at its first position
        self._recent: dict[int, _Block] = {}
        self._lock = threading.Lock()  # the prefetch thread looks up while the trainer's thread asks for counts

    def lookup(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(dataset index, per-dataset sample index) for each of `positions` (any order, at or after the anchor)."""
        positions = np.asarray(positions, dtype=np.int64)
        datasets = np.empty(positions.size, dtype=np.int16)
        samples = np.empty(positions.size, dtype=np.int64)
        if positions.size == 0:
            return datasets, samples
        relative = positions - self.anchor_position
        if int(relative.min()) < 0:
            raise IndexError(f"position {int(positions.min())} is before this blend's anchor {self.anchor_position}")
        numbers, offsets = np.divmod(relative, BLOCK_SAMPLES)
        for number in np.unique(numbers).tolist():
            block = self._block(number)
            where = numbers == number
            datasets[where] = block.datasets[offsets[where]]
            samples[where] = block.samples[offsets[where]]
        return datasets, samples

    def counts_at(self, position: int) -> list[int]:
        """Samples each dataset gave before `position`."""
        number, offset = divmod(position - self.anchor_position, BLOCK_SAMPLES)
        if number < 0:
            raise IndexError(f"position {position} is before this blend's anchor {self.anchor_position}")
        block = self._block(number)
        counts = np.bincount(block.datasets[:offset], minlength=len(self.weights))
        return [int(before + more) for before, more in zip(block.counts, counts.tolist(), strict=True)]

    def _block(self, number: int) -> _Block:
        with self._lock:
            return self._block_locked(number)

    def _block_locked(self, number: int) -> _Block:
        block = self._recent.get(number)
        if block is not None:
            return block
        start = max(n for n in self._block_counts if n <= number)
        for each in range(start, number + 1):
            first = self.anchor_position + each * BLOCK_SAMPLES
            datasets, samples, after = blend_block(self.weights, first, self._block_counts[each], BLOCK_SAMPLES)
            self._block_counts[each + 1] = after
            block = _Block(first, self._block_counts[each], datasets, samples)
            self._recent[each] = block
            while len(self._recent) > 4:  # the prefetch thread works at most a block or two ahead of the trainer
                del self._recent[min(self._recent)]
        return self._recent[number]
