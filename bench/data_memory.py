"""Peak memory of writing a prepared dataset: N and 10 N short documents, each written by a fresh process.

prepare_peak_rss_10x_documents: the peak resident memory (VmHWM) of a process that writes 10 N short documents
through `training.data.writer.write_dataset` against one that writes N; ratio = 10 N / N, goal <= 1.1 (memory
independent of the document count). megatron-core's IndexedDatasetBuilder, which the writer used before, is
measured the same way for the details: it keeps every length and document index in Python lists.

Run as `python -m bench.data_memory {ours|megatron-core} DOCUMENTS PREFIX`, it writes the documents and prints the
process's peak RSS in bytes.
"""

from __future__ import annotations

import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from bench.result import BenchResult, ratio
from spec.cli import user_errors
from training.data.indexed import bin_path, idx_path
from training.data.writer import TokenizerInfo, write_dataset

DOCUMENTS = 50_000
SCALE = 10
DOCUMENT_TOKENS = 8  # short documents: the index, not the tokens, is what grows
VOCAB_SIZE = 50_000
EOD_ID = 0
ROUNDS = 1  # peak RSS barely moves between runs, unlike times
TARGET = "<= 1.1"
_MIB = 1 << 20


def _documents(count: int) -> Iterator[np.ndarray]:
    document = np.arange(1, DOCUMENT_TOKENS + 1, dtype=np.int64)
    for _ in range(count):
        yield document


def _write_ours(prefix: Path, count: int) -> None:
    prefix.parent.mkdir(parents=True, exist_ok=True)
    source = prefix.with_name(prefix.name + ".source.txt")
    source.write_text(f"{count} synthetic documents of {DOCUMENT_TOKENS} tokens\n", encoding="utf-8")
    info = TokenizerInfo(sha256="0" * 64, vocab_size=VOCAB_SIZE, eod_id=EOD_ID, eod_token="<|endoftext|>")
    write_dataset(prefix, ((0, document) for document in _documents(count)), info, [source])


def _write_megatron_core(prefix: Path, count: int) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder

    builder = IndexedDatasetBuilder(str(bin_path(prefix)), dtype=np.uint16)
    for document in _documents(count):
        sequence = np.append(document, EOD_ID).astype(np.uint16)
        builder.add_document(sequence, [sequence.size])
    builder.finalize(str(idx_path(prefix)))


_WRITERS = {"ours": _write_ours, "megatron-core": _write_megatron_core}


def peak_rss_bytes(writer: str, count: int, prefix: Path) -> int:
    """The peak RSS of a fresh Python process that imports the writer and writes `count` documents."""
    completed = subprocess.run(
        [sys.executable, "-m", "bench.data_memory", writer, str(count), str(prefix)],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(completed.stdout.split()[-1])


def write_memory_benchmark(workdir: Path) -> BenchResult:
    counts = {"small": DOCUMENTS, "large": DOCUMENTS * SCALE}
    peaks = {(writer, size): float("inf") for writer in _WRITERS for size in counts}
    for round_number in range(ROUNDS):
        order = list(peaks) if round_number % 2 == 0 else list(reversed(peaks))
        for writer, size in order:
            prefix = workdir / f"memory-{writer}-{size}_text_document"
            peaks[writer, size] = min(peaks[writer, size], peak_rss_bytes(writer, counts[size], prefix))
    small, large = peaks["ours", "small"], peaks["ours", "large"]
    builder_small, builder_large = peaks["megatron-core", "small"], peaks["megatron-core", "large"]
    growth = (builder_large - builder_small) / (counts["large"] - counts["small"])
    return BenchResult(
        name="prepare_peak_rss_10x_documents",
        value=round(large / _MIB, 1),
        unit="MiB",
        baseline_name=f"prepare_peak_rss_{counts['small'] // 1000}k_documents",
        baseline_value=round(small / _MIB, 1),
        ratio=ratio(large, small),
        target=TARGET,
        note=(
            f"peak RSS of one process writing {counts['large']:,} documents of {DOCUMENT_TOKENS} tokens against one "
            f"writing {counts['small']:,}; ratio = 10x / 1x, lower is better; {ROUNDS} run each"
        ),
        details=[
            "Each side is a fresh `python -m bench.data_memory` process (its VmHWM), so both carry the same "
            "imports (numpy, the writer). The writer appends each sequence to the .bin and its length to a "
            "temporary file, hashes both files as it writes them, and streams the .idx in chunks at the end.",
            f"megatron-core's IndexedDatasetBuilder, measured the same way in this run: "
            f"{builder_small / _MIB:,.1f} MiB for {counts['small']:,} documents, {builder_large / _MIB:,.1f} MiB "
            f"for {counts['large']:,} ({growth:,.0f} bytes a document; its imports include torch).",
        ],
    )


def peak_rss_of_this_process() -> int:
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the parent through fork and exec, so a child of the
    # bench (which has imported torch) would report the bench's own peak.
    for line in Path("/proc/self/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("/proc/self/status: no VmHWM line (peak RSS is read on Linux only)")


@user_errors
def main(argv: list[str]) -> int:
    writer, count, prefix = argv
    _WRITERS[writer](Path(prefix), int(count))
    print(peak_rss_of_this_process())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
