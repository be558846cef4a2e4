"""Raw text -> Megatron indexed dataset `<prefix>_text_document.{bin,idx}` plus its manifest.

    python -m training.prepare --input data/*.jsonl --output-prefix build/data/corpus [--tokenizer tokenizer.json]
    python -m training.prepare --demo-corpus --output-prefix build/data/demo
    python -m training.prepare --sft --input rows.jsonl --tokenizer tokenizer.json --output-prefix build/data/sft

With --sft the inputs are instruction or chat rows, written as tokens and a loss mask (training/sft/prepare.py);
--sft --demo-corpus takes the demo instruction set built from the demo corpus (training/sft/demo_instructions.py).

Without --tokenizer a byte-level BPE is trained on the inputs and saved as `<prefix>_tokenizer.json`.
Every document is followed by exactly one end-of-document token; the tokenizer adds nothing of its own.
"""

import argparse
import multiprocessing
import os
import sys
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer
from tqdm import tqdm

from spec.cli import OneLineParser, user_errors
from spec.cli_types import existing_file, output_prefix
from spec.errors import UserError
from training.corpus import demo_corpus_path
from training.data.errors import DataError
from training.data.manifest import DatasetManifest, sha256_file
from training.data.sources import iter_documents, resolve_inputs
from training.data.tokenizer import (
    encode_documents,
    encode_in_worker,
    find_eod,
    init_worker,
    load_tokenizer,
    tokenizer_json,
    train_byte_level_bpe,
    vocab_size,
)
from training.data.writer import TokenizerInfo, write_dataset
from training.sft.demo_instructions import demo_instructions_path
from training.sft.prepare import DEFAULT_SEED, DEFAULT_VALIDATION_FRACTION, prepare_sft

DEFAULT_VOCAB_SIZE = 8192
DOCUMENTS_PER_CHUNK = 64
CHUNKS_IN_FLIGHT_PER_WORKER = 4  # bounds memory: input is read only this far ahead of the writer


def data_prefix_of(output_prefix: str | Path) -> Path:
    """The dataset `--output-prefix OUT` writes (`OUT_text_document.{bin,idx}`): what a job's --data-prefix names."""
    return Path(f"{output_prefix}_text_document")


@dataclass(frozen=True)
class PreparedDataset:
    data_prefix: Path  # what LoaderConfig.data_prefix takes: `<output prefix>_text_document`
    tokenizer_path: Path
    manifest: DatasetManifest


def prepare_dataset(
    inputs: Sequence[str | Path],
    output_prefix: str | Path,
    *,
    tokenizer_path: str | Path | None = None,
    vocab_size_to_train: int = DEFAULT_VOCAB_SIZE,
    text_field: str = "text",
    workers: int = 1,
    eod_token: str | None = None,
    show_progress: bool | None = None,
    on_document: Callable[[str], None] | None = None,
) -> PreparedDataset:
    """`on_document` sees each document's text as it is read (a sharded prepare's progress and ETA)."""
    if workers < 1:
        raise DataError(f"--workers: {workers} must be >= 1")
    files = resolve_inputs(inputs)
    output_prefix = Path(output_prefix)
    output_prefix.parent.mkdir(parents=True, exist_ok=True)
    # A trained tokenizer is written beside its final name and renamed only once the dataset is written: a run
    # refused on the way (an unknown --eod-token, malformed input) leaves the old tokenizer matching the old data.
    trained_path: Path | None = None
    if tokenizer_path is None:
        tokenizer_path = Path(f"{output_prefix}_tokenizer.json")
        _require_documents(files, text_field)
        tokenizer = train_byte_level_bpe(
            (text for _, text in iter_documents(files, text_field) if text), vocab_size_to_train
        )
        eod_name, eod_id = find_eod(tokenizer, eod_token, source="--eod-token")
        trained_path = tokenizer_path.with_name(tokenizer_path.name + ".partial")
        tokenizer.save(str(trained_path))
        tokenizer_file: str | None = tokenizer_path.name
    else:
        tokenizer_path = Path(tokenizer_path)
        tokenizer = load_tokenizer(tokenizer_path)
        tokenizer_file = None
        eod_name, eod_id = find_eod(tokenizer, eod_token, source=str(tokenizer_path))
    try:
        manifest = _write(
            files,
            output_prefix,
            tokenizer,
            text_field,
            workers,
            show_progress,
            on_document,
            TokenizerInfo(
                sha256=sha256_file(trained_path or tokenizer_path),
                vocab_size=vocab_size(tokenizer),
                eod_id=eod_id,
                eod_token=eod_name,
                file_name=tokenizer_file,
            ),
        )
    except BaseException:
        if trained_path is not None:
            trained_path.unlink(missing_ok=True)
        raise
    if trained_path is not None:
        os.replace(trained_path, tokenizer_path)
    return PreparedDataset(data_prefix=data_prefix_of(output_prefix), tokenizer_path=tokenizer_path, manifest=manifest)


def _write(
    files: list[Path],
    output_prefix: Path,
    tokenizer: Tokenizer,
    text_field: str,
    workers: int,
    show_progress: bool | None,
    on_document: Callable[[str], None] | None,
    info: TokenizerInfo,
) -> DatasetManifest:
    """Tokenize every document and write the dataset and its manifest (training/data/writer.py)."""
    if show_progress is None:
        show_progress = sys.stderr.isatty()
    documents = iter_documents(files, text_field)
    chunks = _chunks(documents if on_document is None else _seen(documents, on_document))
    encoded = (
        _encode_parallel(tokenizer_json(tokenizer), chunks, workers) if workers > 1 else _encode(tokenizer, chunks)
    )
    data_prefix = data_prefix_of(output_prefix)
    with tqdm(desc="tokenizing", unit="doc", disable=not show_progress) as progress:
        return write_dataset(data_prefix, _counted(encoded, progress), info, files)


Chunk = tuple[list[int], list[str]]


def _require_documents(files: Sequence[Path], text_field: str) -> None:
    if not any(text for _, text in iter_documents(files, text_field)):
        raise DataError(f"--input: empty corpus: {[str(f) for f in files]} hold no non-empty document")


def _seen(documents: Iterator[tuple[int, str]], on_document: Callable[[str], None]) -> Iterator[tuple[int, str]]:
    for source, text in documents:
        on_document(text)
        yield source, text


def _chunks(documents: Iterator[tuple[int, str]]) -> Iterator[Chunk]:
    sources: list[int] = []
    texts: list[str] = []
    for source, text in documents:
        sources.append(source)
        texts.append(text)
        if len(texts) == DOCUMENTS_PER_CHUNK:
            yield sources, texts
            sources, texts = [], []
    if texts:
        yield sources, texts


def _encode(tokenizer: object, chunks: Iterator[Chunk]) -> Iterator[tuple[int, np.ndarray]]:
    for sources, texts in chunks:
        yield from zip(sources, encode_documents(tokenizer, texts), strict=True)  # type: ignore[arg-type]


def _encode_parallel(tokenizer_text: str, chunks: Iterator[Chunk], workers: int) -> Iterator[tuple[int, np.ndarray]]:
    """Chunks go to a process pool and come back in input order, with a bounded number in flight. A worker that
    dies (the OOM killer's SIGKILL) breaks the pool, and the run ends with one line instead of waiting forever for a
    chunk that multiprocessing.Pool would silently never return."""
    # spawn, not fork: the parent may already run tokenizers' own threads, which fork would leave broken.
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=context, initializer=init_worker, initargs=(tokenizer_text,)) as pool:
        in_flight: deque[tuple[list[int], int, Future[list[np.ndarray]]]] = deque()
        submitted = 0
        for sources, texts in chunks:
            in_flight.append((sources, submitted, pool.submit(encode_in_worker, texts)))
            submitted += len(texts)
            if len(in_flight) >= workers * CHUNKS_IN_FLIGHT_PER_WORKER:
                yield from _collected(*in_flight.popleft(), submitted)
        while in_flight:
            yield from _collected(*in_flight.popleft(), submitted)


def _collected(
    sources: list[int], first: int, future: Future[list[np.ndarray]], submitted: int
) -> Iterator[tuple[int, np.ndarray]]:
    try:
        encoded = future.result()
    except BrokenProcessPool:
        raise DataError(
            f"--workers: a tokenizer worker process died (killed by a signal, or out of memory) with documents "
            f"{first + 1:,}-{submitted:,} in flight; nothing was written. Run again, with fewer --workers if memory "
            "ran out"
        ) from None
    return zip(sources, encoded, strict=True)


def _counted(documents: Iterator[tuple[int, np.ndarray]], progress: tqdm) -> Iterator[tuple[int, np.ndarray]]:
    for item in documents:
        progress.update(1)
        yield item


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m training.prepare", description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--input", nargs="+", metavar="PATH", help=".jsonl/.json/.txt files or directories")
    source.add_argument(
        "--demo-corpus", action="store_true", help="use the standard-library docstring corpus (built on first use)"
    )
    parser.add_argument(
        "--output-prefix",
        required=True,
        type=output_prefix,
        metavar="OUT",
        help="writes OUT_text_document.{bin,idx}",
    )
    parser.add_argument(
        # checked after parsing (main), so a command naming a file an earlier step writes parses on its own
        "--tokenizer",
        metavar="tokenizer.json",
        help="HF tokenizer.json (Llama, NeoX, ...)",
    )
    parser.add_argument(
        "--vocab-size", type=int, help=f"BPE vocabulary to train without --tokenizer (default {DEFAULT_VOCAB_SIZE})"
    )
    parser.add_argument("--text-field", default="text", help="JSONL field holding the document text")
    parser.add_argument("--eod-token", help="end-of-document token (default: the first of the usual ones present)")
    parser.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 1) - 1), help="tokenizer processes")
    sft = parser.add_argument_group("supervised fine-tuning data (--sft)")
    sft.add_argument(
        "--sft", action="store_true", help="instruction/chat JSONL -> OUT_sft_tokens and OUT_sft_loss_mask"
    )
    sft.add_argument(
        "--validation-fraction",
        type=float,
        help=f"--sft: rows held out for validation (default {DEFAULT_VALIDATION_FRACTION}; the job's data.validation_fraction)",
    )
    sft.add_argument(
        "--seed", type=int, help=f"--sft: the held-out split's seed (default {DEFAULT_SEED}; the job's data.seed)"
    )
    return parser


@user_errors
def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.tokenizer is not None:
        try:
            existing_file(args.tokenizer)
        except argparse.ArgumentTypeError as error:
            parser.error(f"argument --tokenizer: {error}")
    if args.sft:
        return _main_sft(args)
    for option in ("validation_fraction", "seed"):
        if getattr(args, option) is not None:
            raise UserError(f"--{option.replace('_', '-')}: only applies with --sft")
    if args.tokenizer is not None and args.vocab_size is not None:
        raise UserError("--vocab-size: only applies when no --tokenizer is given")
    if args.demo_corpus:
        try:
            inputs = [demo_corpus_path()]
        except OSError as error:
            where = error.filename or "the demo corpus cache"
            raise UserError(f"--demo-corpus: cannot write the corpus cache {where}: {error.strerror}") from None
    else:
        inputs = args.input
    prepared = prepare_dataset(
        inputs,
        args.output_prefix,
        tokenizer_path=args.tokenizer,
        vocab_size_to_train=DEFAULT_VOCAB_SIZE if args.vocab_size is None else args.vocab_size,
        text_field=args.text_field,
        workers=args.workers,
        eod_token=args.eod_token,
    )
    manifest = prepared.manifest
    print(
        f"wrote {prepared.data_prefix}.{{bin,idx,manifest.json}}: {manifest.document_count} documents, "
        f"{manifest.token_count} tokens ({manifest.dtype}), vocab {manifest.vocab_size}, "
        f"EOD {manifest.eod_token!r} = {manifest.eod_id}; tokenizer {prepared.tokenizer_path}"
    )
    return 0


def _main_sft(args: argparse.Namespace) -> int:
    if args.tokenizer is None:
        raise UserError("--tokenizer: --sft needs the base model's tokenizer.json (its data must use the same ids)")
    for option in ("vocab_size",):
        if getattr(args, option) is not None:
            raise UserError(f"--{option.replace('_', '-')}: does not apply with --sft")
    if args.text_field != "text":
        raise UserError("--text-field: does not apply with --sft (rows hold prompt/response or messages)")
    if args.demo_corpus:
        try:
            inputs = [demo_instructions_path()]
        except OSError as error:
            where = error.filename or "the demo corpus cache"
            raise UserError(f"--demo-corpus: cannot write the instruction set {where}: {error.strerror}") from None
    else:
        inputs = args.input
    prepared = prepare_sft(
        inputs,
        args.output_prefix,
        tokenizer_path=args.tokenizer,
        eod_token=args.eod_token,
        validation_fraction=DEFAULT_VALIDATION_FRACTION
        if args.validation_fraction is None
        else args.validation_fraction,
        seed=DEFAULT_SEED if args.seed is None else args.seed,
    )
    manifest = prepared.manifest
    print(
        f"wrote {prepared.tokens_prefix}.{{bin,idx,manifest.json}} and its loss mask: {manifest.document_count} "
        f"samples, {manifest.token_count} tokens, {manifest.extra['trained_tokens']} trained; template "
        f"{manifest.extra['template']}; Bridge rows in {prepared.bridge_dir}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
