"""Raw text inputs: JSONL files (one JSON object per line, text in a named field) or .txt files (one document each)."""

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

from training.data.errors import DataError

JSONL_SUFFIXES = (".jsonl", ".json")
TEXT_SUFFIXES = (".txt",)


def resolve_inputs(inputs: Sequence[str | Path]) -> list[Path]:
    """Files in the order given; a directory stands for its .jsonl/.json/.txt files in sorted order."""
    if not inputs:
        raise DataError("--input: no input files given")
    files: list[Path] = []
    for raw in inputs:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in JSONL_SUFFIXES + TEXT_SUFFIXES)
            if not found:
                raise DataError(f"--input: {path}: directory holds no .jsonl, .json or .txt files")
            files.extend(found)
        elif path.is_file():
            if path.suffix not in JSONL_SUFFIXES + TEXT_SUFFIXES:
                raise DataError(
                    f"--input: {path}: unsupported file type {path.suffix!r} (expected .jsonl, .json or .txt)"
                )
            files.append(path)
        else:
            raise DataError(f"--input: {path}: no such file or directory")
    return files


def iter_documents(files: Sequence[Path], text_field: str = "text") -> Iterator[tuple[int, str]]:
    """(file index, document text) for every document, in file order then line order."""
    for file_index, path in enumerate(files):
        if path.suffix in TEXT_SUFFIXES:
            yield file_index, _read_text(path)
        else:
            for text in _iter_jsonl(path, text_field):
                yield file_index, text


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise DataError(f"{path}: not UTF-8 text (byte {error.start})") from None


def _iter_jsonl(path: Path, text_field: str) -> Iterator[str]:
    with path.open("rb") as handle:
        for line_number, raw_line in enumerate(handle, start=1):
            if not raw_line.strip():
                continue
            try:
                record = json.loads(raw_line)
            except (json.JSONDecodeError, UnicodeDecodeError) as error:
                raise DataError(f"{path}:{line_number}: not valid JSON: {error}") from None
            if not isinstance(record, dict) or text_field not in record:
                raise DataError(f"{path}:{line_number}: no {text_field!r} field (--text-field {text_field})")
            text = record[text_field]
            if not isinstance(text, str):
                raise DataError(
                    f"{path}:{line_number}: field {text_field!r} is {type(text).__name__}, expected a string"
                )
            yield text
