"""Data-path benchmarks on the embedded demo corpus.

loader_tokens_per_s: the training loader (packing, shuffled order, collation into LongTensors, the prefetch
thread) against a raw sequential read of the same .bin bytes delivered in the same form (windows of
seq_len + 1 tokens as LongTensors) - the least any reader must do. Both run from the page cache, so the
ratio isolates the loader's own CPU cost.

prepare_tokens_per_s: `training.prepare` (read JSONL, tokenize in worker processes, write .bin/.idx,
hash the outputs) against the tokenizer's own `encode_batch` over the same texts.
"""

from __future__ import annotations

import json
import os
import time
from itertools import islice
from pathlib import Path

import numpy as np
import torch

from bench.result import BenchResult
from training.corpus import demo_corpus_path
from training.data.indexed import bin_path, idx_path, open_tokens, read_index
from training.data.loader import LoaderConfig, PackedTokenLoader
from training.data.tokenizer import load_tokenizer, without_special_token_handling
from training.prepare import prepare_dataset

SEQ_LEN = 1024
MICRO_BATCH = 8


def prepared_demo(workdir: Path) -> tuple[Path, Path, Path]:
    """(corpus, tokenizer.json, data prefix) of the demo corpus, prepared once per bench run."""
    corpus = demo_corpus_path(workdir / "corpus")
    prepared = prepare_dataset([corpus], workdir / "demo", workers=1, show_progress=False)
    return corpus, prepared.tokenizer_path, prepared.data_prefix


def _raw_sequential_tokens_per_s(prefix: Path, batches: int) -> float:
    index = read_index(idx_path(prefix))
    tokens = open_tokens(prefix, index)
    window = SEQ_LEN + 1
    per_batch = MICRO_BATCH * window
    usable = (tokens.size // per_batch) * per_batch
    start = time.perf_counter()
    delivered = 0
    for offset in range(0, min(usable, batches * per_batch), per_batch):
        batch = torch.from_numpy(tokens[offset : offset + per_batch].astype(np.int64)).view(MICRO_BATCH, window)
        inputs, labels = batch[:, :-1], batch[:, 1:]
        delivered += inputs.numel() + 0 * labels.numel()
    return delivered / (time.perf_counter() - start)


def _loader_tokens_per_s(prefix: Path, batches: int) -> float:
    loader = PackedTokenLoader(
        LoaderConfig(data_prefix=str(prefix), seq_len=SEQ_LEN, micro_batch_size=MICRO_BATCH), 0, 1
    )
    iterator = iter(loader)
    next(iterator)  # the prefetch thread starts; steady state is what training sees
    start = time.perf_counter()
    delivered = 0
    for batch in islice(iterator, batches):
        delivered += batch["input_ids"].numel()
    return delivered / (time.perf_counter() - start)


def loader_benchmark(prefix: Path, repeats: int = 3) -> BenchResult:
    index = read_index(idx_path(prefix))
    batches = max(1, index.token_count // (MICRO_BATCH * (SEQ_LEN + 1)) - 2)
    # Warm the page cache so both sides read memory, not disk.
    bin_path(prefix).read_bytes()
    raw = max(_raw_sequential_tokens_per_s(prefix, batches) for _ in range(repeats))
    ours = max(_loader_tokens_per_s(prefix, batches) for _ in range(repeats))
    return BenchResult(
        name="loader_tokens_per_s",
        value=round(ours),
        unit="tokens/s",
        baseline_name="raw_sequential_read_tokens_per_s",
        baseline_value=round(raw),
        ratio=round(ours / raw, 3),
        target=">= 0.9",
        note=f"{batches} batches of {MICRO_BATCH}x{SEQ_LEN}, page cache warm, one rank",
    )


def prepare_benchmark(corpus: Path, tokenizer_path: Path, workdir: Path) -> BenchResult:
    texts = [json.loads(line)["text"] for line in corpus.read_text().splitlines() if line.strip()]
    tokenizer = without_special_token_handling(load_tokenizer(tokenizer_path))
    start = time.perf_counter()
    encoded = tokenizer.encode_batch(texts)
    baseline_seconds = time.perf_counter() - start
    baseline_tokens = sum(len(e.ids) for e in encoded)

    workers = max(1, min(2, os.cpu_count() or 1))
    start = time.perf_counter()
    prepared = prepare_dataset(
        [corpus], workdir / "bench-prepare", tokenizer_path=tokenizer_path, workers=workers, show_progress=False
    )
    ours_seconds = time.perf_counter() - start
    # The dataset holds one EOD per document on top of the text's tokens; compare text tokens only.
    ours_tokens = prepared.manifest.token_count - prepared.manifest.document_count
    ours, baseline = ours_tokens / ours_seconds, baseline_tokens / baseline_seconds
    return BenchResult(
        name="prepare_tokens_per_s",
        value=round(ours),
        unit="tokens/s",
        baseline_name="tokenizer_encode_batch_tokens_per_s",
        baseline_value=round(baseline),
        ratio=round(ours / baseline, 3),
        target="informational (higher is better)",
        note=f"demo corpus, {len(texts)} documents, {workers} worker processes",
    )
