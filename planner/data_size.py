"""How many bytes the prepared data of a run takes, and whether the spec's FSx holds it beside the checkpoints.

A prepared dataset (`llm-prepare`, docs/data.md) stores each token in 2 bytes (uint16) when the vocabulary has fewer
than 65,500 ids and in 4 (int32) otherwise, plus an .idx of 20 bytes a document (an int32 length, an int64 offset and
an int64 boundary). The checkpoints a run keeps are checkpoint.keep_last copies of the backend's bytes per parameter.
FSx for Lustre's LZ4 compression is not counted: token ids compress little, and a plan should not lean on it.
"""

from __future__ import annotations

from dataclasses import dataclass

from slurm.backends import backend_named
from spec.cluster import FsxSpec
from training.models.args import ModelArgs
from training.models.params import count_parameters

# training.data.indexed.UINT16_VOCAB_LIMIT (the planner does not import the data package; a test compares them)
UINT16_VOCAB_LIMIT = 65_500
GIB = 1 << 30


def token_bytes(vocab_size: int) -> int:
    """Bytes per stored token id for this vocabulary: 2 (uint16) or 4 (int32), as the writer chooses."""
    return 2 if vocab_size < UINT16_VOCAB_LIMIT else 4


@dataclass(frozen=True)
class StoragePlan:
    tokens: float
    vocab_size: int
    data_bytes: float  # the .bin files; the .idx adds 20 bytes a document
    checkpoint_bytes: int  # one checkpoint
    keep_last: int
    fsx_bytes: int | None  # None: no file system in the spec

    @property
    def needed_bytes(self) -> float:
        return self.data_bytes + self.checkpoint_bytes * self.keep_last

    @property
    def fits(self) -> bool:
        return self.fsx_bytes is None or self.needed_bytes <= self.fsx_bytes

    def lines(self) -> list[str]:
        """The plan's storage lines: the data's size, and a warning when the file system cannot hold it all."""
        lines = [
            f"prepared data: {_tb(self.data_bytes)} ({self.tokens:.3g} tokens x {token_bytes(self.vocab_size)} bytes, "
            f"vocabulary {self.vocab_size:,}; the .idx adds 20 bytes a document)"
        ]
        if self.fsx_bytes is not None and not self.fits:
            fsx_gib = self.fsx_bytes // GIB
            lines.append(
                f"warning: cluster.fsx.storage_gib {fsx_gib} ({_tb(self.fsx_bytes)}) cannot hold the prepared data "
                f"({_tb(self.data_bytes)}) plus checkpoint.keep_last {self.keep_last} x {_tb(self.checkpoint_bytes)} "
                f"of checkpoints = {_tb(self.needed_bytes)}; raise storage_gib to at least "
                f"{_storage_gib_for(self.needed_bytes)} (1200 or a multiple of 2400)"
            )
        return lines


def storage_plan(model: ModelArgs, backend: str, tokens: float, keep_last: int, fsx: FsxSpec | None) -> StoragePlan:
    """`backend`: a slurm.backends name or --backend option (its checkpoint bytes per parameter)."""
    checkpoint = count_parameters(model).total * backend_named(backend).checkpoint_bytes_per_param
    return StoragePlan(
        tokens=tokens,
        vocab_size=model.vocab_size,
        data_bytes=tokens * token_bytes(model.vocab_size),
        checkpoint_bytes=checkpoint,
        keep_last=keep_last,
        fsx_bytes=fsx.storage_gib * GIB if fsx is not None else None,
    )


def _tb(value: float) -> str:
    return f"{value / 1e12:,.2f} TB" if value >= 1e11 else f"{value / 1e9:,.1f} GB"


def _storage_gib_for(needed: float) -> int:
    """The smallest FSx size the spec accepts (1200, or a multiple of 2400 GiB) that holds `needed` bytes."""
    gib = needed / GIB
    if gib <= 1200:
        return 1200
    return int(-(-gib // 2400) * 2400)
