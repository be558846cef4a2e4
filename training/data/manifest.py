"""The sidecar manifest `<prefix>.manifest.json` written beside every prepared .bin/.idx pair."""

import hashlib
import json
import os
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from training.data.errors import DataError

MANIFEST_FORMAT = 1
_HASH_CHUNK_BYTES = 8 * 1024 * 1024


def manifest_path(prefix: str | Path) -> Path:
    return Path(f"{prefix}.manifest.json")


def sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        while chunk := handle.read(_HASH_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class FileRecord:
    """A file the manifest vouches for: its name relative to the manifest's directory, size and sha256."""

    name: str
    size: int
    sha256: str


@dataclass(frozen=True)
class SourceRecord:
    """One raw input file that went into the dataset."""

    path: str
    size: int
    sha256: str
    documents: int


@dataclass(frozen=True)
class DatasetManifest:
    tokenizer_sha256: str
    vocab_size: int
    dtype: str
    eod_id: int
    eod_token: str
    document_count: int
    token_count: int
    bin: FileRecord
    idx: FileRecord
    sources: list[SourceRecord]
    tokenizer_file: str | None = None  # set when the tokenizer.json sits beside the dataset
    skipped_empty_documents: int = 0
    format: int = MANIFEST_FORMAT
    created_by: str = "training.prepare"
    extra: dict[str, Any] = field(default_factory=dict)

    def files(self) -> list[FileRecord]:
        return [self.bin, self.idx]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    def write(self, path: str | Path) -> None:
        """Write atomically so a crash never leaves a half-written manifest that looks valid."""
        path = Path(path)
        partial = path.with_name(path.name + ".partial")
        partial.write_text(self.to_json(), encoding="utf-8")
        os.replace(partial, path)


def read_manifest(path: str | Path) -> DatasetManifest:
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: manifest not found (datasets are written by `python -m training.prepare`)")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise DataError(f"{path}: manifest is not valid JSON: {error}") from None
    if not isinstance(raw, dict):
        raise DataError(f"{path}: manifest must be a JSON object, found {type(raw).__name__}")
    if raw.get("format") != MANIFEST_FORMAT:
        raise DataError(f"{path}: format: {raw.get('format')!r} is not the supported manifest format {MANIFEST_FORMAT}")
    sources = raw.get("sources", [])
    if not isinstance(sources, list):
        raise DataError(f"{path}: sources: {sources!r} must be a list")
    return DatasetManifest(
        **{
            **_pick(raw, DatasetManifest, path),
            "bin": FileRecord(**_pick(raw.get("bin"), FileRecord, path, "bin")),
            "idx": FileRecord(**_pick(raw.get("idx"), FileRecord, path, "idx")),
            "sources": [
                SourceRecord(**_pick(item, SourceRecord, path, f"sources[{i}]")) for i, item in enumerate(sources)
            ],
        }
    )


_NESTED = {"bin", "idx", "sources"}


def _pick(raw: Any, cls: type, path: Path, where: str = "") -> dict[str, Any]:
    """The fields of `cls` from `raw`, each checked against its annotated type, with one-line errors."""
    prefix = f"{where}." if where else ""
    if not isinstance(raw, dict):
        raise DataError(f"{path}: {where}: {raw!r} must be an object")
    picked: dict[str, Any] = {}
    for item in fields(cls):
        if item.name not in raw:
            if item.default is MISSING and item.default_factory is MISSING:
                raise DataError(f"{path}: {prefix}{item.name}: missing from the manifest")
            continue
        value = raw[item.name]
        if item.name not in _NESTED and not _has_type(value, item.type):
            raise DataError(f"{path}: {prefix}{item.name}: {value!r} is not of type {item.type}")
        picked[item.name] = value
    return picked


def _has_type(value: Any, annotation: Any) -> bool:
    allowed = {int: (int,), str: (str,), str | None: (str, type(None)), dict[str, Any]: (dict,)}[annotation]
    # bool is an int subclass; a manifest saying `"vocab_size": true` is still wrong.
    return isinstance(value, allowed) and not (isinstance(value, bool) and bool not in allowed)
