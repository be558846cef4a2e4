import hashlib
import json
from pathlib import Path

import pytest

from training.data.errors import DataError
from training.data.manifest import DatasetManifest, FileRecord, SourceRecord, read_manifest, sha256_file


def manifest() -> DatasetManifest:
    return DatasetManifest(
        tokenizer_sha256="a" * 64,
        vocab_size=50_277,
        dtype="uint16",
        eod_id=0,
        eod_token="<|endoftext|>",
        document_count=3,
        token_count=100,
        bin=FileRecord("x_text_document.bin", 200, "b" * 64),
        idx=FileRecord("x_text_document.idx", 106, "c" * 64),
        sources=[SourceRecord("data/a.jsonl", 1234, "d" * 64, 3)],
    )


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "x_text_document.manifest.json"
    manifest().write(path)
    assert read_manifest(path) == manifest()
    assert not list(tmp_path.glob("*.partial"))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda m: m.pop("eod_id"), r"eod_id: missing from the manifest"),
        (lambda m: m["bin"].pop("sha256"), r"bin.sha256: missing from the manifest"),
        (lambda m: m.update(token_count=True), r"token_count: True is not of type <class 'int'>"),
        (lambda m: m.update(format=99), r"format: 99 is not the supported manifest format 1"),
        (lambda m: m["sources"][0].update(documents="3"), r"sources\[0\].documents: '3' is not of type"),
    ],
)
def test_malformed_manifest_names_the_field(tmp_path: Path, edit, message: str) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "m.manifest.json"
    raw = json.loads(manifest().to_json())
    edit(raw)
    path.write_text(json.dumps(raw))
    with pytest.raises(DataError, match=message):
        read_manifest(path)


def test_not_json(tmp_path: Path) -> None:
    path = tmp_path / "m.manifest.json"
    path.write_text("{")
    with pytest.raises(DataError, match=r"m.manifest.json: manifest is not valid JSON"):
        read_manifest(path)


def test_sha256_file(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 10_000)
    assert sha256_file(path) == hashlib.sha256(b"x" * 10_000).hexdigest()
