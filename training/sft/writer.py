"""Write SFT samples as two aligned Megatron indexed datasets and the tokens' manifest, all or nothing.

`<prefix>_sft_tokens.{bin,idx}`: one document per sample, int32 ids, the EOD id appended.
`<prefix>_sft_loss_mask.{bin,idx}`: uint8, the same lengths; 1 where the token is trained (response and EOD).
Both are written with megatron-core's own builder under `.partial` names and renamed only after the last row,
as training/data/writer.py does for pretraining data: a refused row leaves the previous dataset as it was.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from training.data.errors import DataError
from training.data.indexed import bin_path, idx_path, read_index
from training.data.manifest import DatasetManifest, SourceRecord, manifest_path, sha256_file
from training.data.writer import TokenizerInfo, _file_record, _indexed_dataset_builder

TOKEN_DTYPE = np.int32
MASK_DTYPE = np.uint8


def _partial(path: Path) -> Path:
    return path.with_name(path.name + ".partial")


@dataclass
class SampleWriter:
    """Builders for the tokens and the mask; `add` one sample at a time, then `commit` or `discard`."""

    tokens_prefix: Path
    mask_prefix: Path
    tokenizer: TokenizerInfo
    sources: list[Path]
    samples: int = 0
    tokens: int = 0
    trained_tokens: int = 0
    per_source: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tokens_prefix.parent.mkdir(parents=True, exist_ok=True)
        self.per_source = [0] * len(self.sources)
        builder = _indexed_dataset_builder()
        self._builders = [
            builder(str(_partial(bin_path(prefix))), dtype=dtype)
            for prefix, dtype in ((self.tokens_prefix, TOKEN_DTYPE), (self.mask_prefix, MASK_DTYPE))
        ]

    def add(self, source_index: int, ids: np.ndarray, mask: np.ndarray, where: str) -> None:
        """ids and mask without the EOD; it is appended here, trained (the model learns to stop)."""
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= self.tokenizer.vocab_size):
            raise DataError(f"{where}: token id {int(ids.max())} outside the vocabulary of {self.tokenizer.vocab_size}")
        sequence = np.append(ids, self.tokenizer.eod_id).astype(TOKEN_DTYPE)
        trained = np.append(mask, 1).astype(MASK_DTYPE)
        arrays: tuple[np.ndarray, np.ndarray] = (sequence, trained)
        for builder, array in zip(self._builders, arrays, strict=True):
            builder.add_document(array, [array.size])
        self.samples += 1
        self.tokens += sequence.size
        self.trained_tokens += int(trained.sum())
        self.per_source[source_index] += 1

    def discard(self) -> None:
        for builder, prefix in zip(self._builders, (self.tokens_prefix, self.mask_prefix), strict=True):
            builder.data_file.close()
            _partial(bin_path(prefix)).unlink(missing_ok=True)
            _partial(idx_path(prefix)).unlink(missing_ok=True)

    def finalize(self) -> None:
        """Close both builders (still under partial names)."""
        for builder, prefix in zip(self._builders, (self.tokens_prefix, self.mask_prefix), strict=True):
            builder.finalize(str(_partial(idx_path(prefix))))

    def commit(self, extra: dict[str, Any]) -> DatasetManifest:
        """Rename into place and write the manifest; call after finalize, once every row was accepted."""
        manifest_path(self.tokens_prefix).unlink(missing_ok=True)  # stale the moment the data is replaced
        for prefix in (self.tokens_prefix, self.mask_prefix):
            os.replace(_partial(bin_path(prefix)), bin_path(prefix))
            os.replace(_partial(idx_path(prefix)), idx_path(prefix))
        index = read_index(idx_path(self.tokens_prefix))
        manifest = DatasetManifest(
            tokenizer_sha256=self.tokenizer.sha256,
            tokenizer_file=self.tokenizer.file_name,
            vocab_size=self.tokenizer.vocab_size,
            dtype=np.dtype(TOKEN_DTYPE).name,
            eod_id=self.tokenizer.eod_id,
            eod_token=self.tokenizer.eod_token,
            document_count=index.document_count,
            token_count=index.token_count,
            bin=_file_record(bin_path(self.tokens_prefix)),
            idx=_file_record(idx_path(self.tokens_prefix)),
            sources=[
                SourceRecord(path=str(source), size=source.stat().st_size, sha256=sha256_file(source), documents=count)
                for source, count in zip(self.sources, self.per_source, strict=True)
            ],
            created_by="training.sft.prepare",
            extra={
                "kind": "sft",
                "loss_mask": {
                    "bin": vars(_file_record(bin_path(self.mask_prefix))),
                    "idx": vars(_file_record(idx_path(self.mask_prefix))),
                },
                "trained_tokens": self.trained_tokens,
                **extra,
            },
        )
        manifest.write(manifest_path(self.tokens_prefix))
        return manifest
