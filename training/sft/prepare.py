"""`llm-prepare --sft`: instruction or chat JSONL -> tokens and loss mask (Megatron indexed), manifest, Bridge JSONL.

    llm-prepare --sft --input rows.jsonl --tokenizer tok/tokenizer.json --output-prefix build/data/sft

writes build/data/sft_sft_tokens.{bin,idx,manifest.json}, build/data/sft_sft_loss_mask.{bin,idx} and
build/data/bridge/{training,validation}.jsonl ({"input", "output"} per row; the validation rows are the held-out
split the trainer makes with the same validation fraction and seed). The rows are rendered with the tokenizer
directory's chat template (training/sft/template.py); each piece is tokenized on its own, so the mask boundary
is exact, with the tokenizer's special tokens recognized in the template's text (as transformers'
apply_chat_template tokenizes) and nothing added: no BOS beyond what the template writes, one EOD appended.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from training.data.errors import DataError
from training.data.manifest import DatasetManifest, sha256_file
from training.data.sources import resolve_inputs
from training.data.splits import split_documents
from training.data.tokenizer import find_eod, load_tokenizer, vocab_size
from training.data.writer import TokenizerInfo
from training.sft.rows import iter_rows
from training.sft.template import ChatTemplate, Piece, TemplateError, load_chat_template
from training.sft.writer import SampleWriter

DEFAULT_VALIDATION_FRACTION = 0.05
DEFAULT_SEED = 1234
BRIDGE_DIR = "bridge"


def tokens_prefix(output_prefix: str | Path) -> Path:
    """What a job's data.prefix names for `data.kind: sft`."""
    return Path(f"{output_prefix}_sft_tokens")


def tokenizer_beside(output_prefix: str | Path) -> Path:
    """Where an SFT dataset keeps its tokenizer: `<out>_tokenizer.json`, the name a trained one gets."""
    return Path(f"{output_prefix}_tokenizer.json")


def loss_mask_prefix(output_prefix: str | Path) -> Path:
    return Path(f"{output_prefix}_sft_loss_mask")


def mask_prefix_for(tokens: str | Path) -> Path:
    """The loss mask beside a tokens prefix: `<out>_sft_tokens` -> `<out>_sft_loss_mask`."""
    name = str(tokens)
    if not name.endswith("_sft_tokens"):
        raise DataError(f"data.prefix: {name!r} must name an SFT dataset, <output-prefix>_sft_tokens")
    return loss_mask_prefix(name.removesuffix("_sft_tokens"))


@dataclass(frozen=True)
class PreparedSFT:
    tokens_prefix: Path
    bridge_dir: Path
    manifest: DatasetManifest


def encode_pieces(tokenizer: Tokenizer, pieces: Sequence[Piece]) -> tuple[np.ndarray, np.ndarray]:
    """Token ids and their mask (1 = trained), each piece tokenized on its own."""
    encodings = tokenizer.encode_batch([text for text, _ in pieces], add_special_tokens=False)
    ids = [np.asarray(encoding.ids, dtype=np.int64) for encoding in encodings]
    masks = [np.full(len(part), int(trained), dtype=np.uint8) for part, (_, trained) in zip(ids, pieces, strict=True)]
    return np.concatenate(ids), np.concatenate(masks)


def bridge_row(pieces: Sequence[Piece], last_response: str) -> dict[str, str]:
    """Bridge's {"input", "output"}: everything before the last assistant turn, and that turn's content."""
    last = max(index for index, (_, trained) in enumerate(pieces) if trained)
    return {"input": "".join(text for text, _ in pieces[:last]), "output": last_response}


def sft_tokenizer(path: Path) -> Tokenizer:
    tokenizer = load_tokenizer(path)
    tokenizer.encode_special_tokens = False  # a template's <|im_start|> is one special id, as transformers has it
    return tokenizer


def prepare_sft(
    inputs: Sequence[str | Path],
    output_prefix: str | Path,
    *,
    tokenizer_path: str | Path,
    eod_token: str | None = None,
    validation_fraction: float = DEFAULT_VALIDATION_FRACTION,
    seed: int = DEFAULT_SEED,
) -> PreparedSFT:
    if not 0.0 <= validation_fraction < 1.0:
        raise DataError(f"--validation-fraction: {validation_fraction} must be in [0, 1)")
    files = resolve_inputs(inputs)
    output_prefix, tokenizer_path = Path(output_prefix), Path(tokenizer_path)
    tokenizer = sft_tokenizer(tokenizer_path)
    template = load_chat_template(tokenizer_path.parent)
    eod_name, eod_id = find_eod(tokenizer, eod_token, source=str(tokenizer_path))
    # The dataset carries its tokenizer (<out>_tokenizer.json, as a trained one is written): a run on it finds the
    # tokenizer its export and evaluation need from the manifest alone. Copied under a temporary name, renamed with
    # the dataset, so a refused run leaves the old pair as it was.
    beside = tokenizer_beside(output_prefix)
    info = TokenizerInfo(sha256_file(tokenizer_path), vocab_size(tokenizer), eod_id, eod_name, beside.name)
    copied = beside.with_name(f"{beside.name}.{os.getpid()}.partial")
    bridge_dir = output_prefix.parent / BRIDGE_DIR
    writer = SampleWriter(tokens_prefix(output_prefix), loss_mask_prefix(output_prefix), info, files)
    bridge_all = bridge_dir / f".all.{os.getpid()}.partial"
    bridge_parts = {name: bridge_dir / f"{name}.jsonl.partial" for name in ("training", "validation")}
    try:
        bridge_dir.mkdir(parents=True, exist_ok=True)
        if tokenizer_path.resolve() != beside.resolve():
            shutil.copyfile(tokenizer_path, copied)
        with bridge_all.open("w", encoding="utf-8") as bridge:
            _write_samples(files, tokenizer, template, writer, bridge)
        if writer.samples == 0:
            raise DataError(f"--input: no SFT rows in {[str(f) for f in files]}")
        writer.finalize()
        _split_bridge(bridge_all, bridge_parts, writer.samples, validation_fraction, seed)
    except BaseException:
        writer.discard()
        for path in (bridge_all, *bridge_parts.values(), copied):
            path.unlink(missing_ok=True)
        raise
    bridge_all.unlink()
    for name, partial in bridge_parts.items():
        os.replace(partial, bridge_dir / f"{name}.jsonl")
    manifest = writer.commit(
        {
            "template": template.source,
            "validation_fraction": validation_fraction,
            "seed": seed,
            "samples": writer.samples,
        }
    )
    if copied.exists():
        os.replace(copied, beside)
    return PreparedSFT(tokens_prefix(output_prefix), bridge_dir, manifest)


def _write_samples(
    files: Sequence[Path], tokenizer: Tokenizer, template: ChatTemplate, writer: SampleWriter, bridge: object
) -> None:
    for row in iter_rows(files):
        try:
            pieces = template.pieces(row.messages)
        except TemplateError as error:
            raise DataError(f"{row.where}: chat template: {error}") from None
        ids, mask = encode_pieces(tokenizer, pieces)
        if not mask.any():
            raise DataError(f"{row.where}: the assistant's content encodes to no tokens")
        writer.add(row.file_index, ids, mask, row.where)
        last_response = [m["content"] for m in row.messages if m["role"] == "assistant"][-1]
        bridge.write(json.dumps(bridge_row(pieces, last_response), ensure_ascii=False) + "\n")  # type: ignore[attr-defined]


def _split_bridge(all_rows: Path, parts: dict[str, Path], samples: int, validation_fraction: float, seed: int) -> None:
    """The trainer's split (training.data.splits) of the rows, so Bridge holds out the same samples."""
    _, validation = split_documents(samples, validation_fraction, seed)
    held_out = np.zeros(samples, dtype=bool)
    held_out[validation] = True
    with (
        all_rows.open(encoding="utf-8") as rows,
        parts["training"].open("w", encoding="utf-8") as training,
        parts["validation"].open("w", encoding="utf-8") as held,
    ):
        for index, line in enumerate(rows):
            (held if held_out[index] else training).write(line)
