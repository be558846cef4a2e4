import json
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models

from tests.training.data.conftest import MakeDataset, random_documents
from training.data.errors import DataError
from training.data.manifest import manifest_path, sha256_file
from training.data.verify import verify_dataset


@pytest.fixture
def prefix(make_dataset: MakeDataset) -> str:
    return make_dataset(random_documents(12, seed=3))


def rewrite_manifest(prefix: str, **changes: object) -> None:
    path = manifest_path(prefix)
    manifest = json.loads(path.read_text())
    for dotted, value in changes.items():
        target = manifest
        *parents, leaf = dotted.split("__")
        for parent in parents:
            target = target[parent]
        target[leaf] = value
    path.write_text(json.dumps(manifest))


def word_level_tokenizer(path: Path, words: int) -> Path:
    vocab = {"<|endoftext|>": 0, "[UNK]": 1} | {f"w{i}": i + 2 for i in range(words - 2)}
    Tokenizer(models.WordLevel(vocab, unk_token="[UNK]")).save(str(path))
    return path


def test_intact_dataset_verifies_with_checksums(prefix: str) -> None:
    manifest = verify_dataset(prefix, checksums=True)
    assert manifest.document_count == 12 and manifest.dtype == "uint16"


def test_same_size_corruption_is_found_only_with_checksums(prefix: str) -> None:
    path = Path(f"{prefix}.bin")
    data = bytearray(path.read_bytes())
    data[10] ^= 0xFF
    path.write_bytes(bytes(data))
    verify_dataset(prefix)  # the fast path checks sizes only
    with pytest.raises(DataError, match=r"\.bin: sha256 mismatch: manifest expects [0-9a-f]{64}, found [0-9a-f]{64}"):
        verify_dataset(prefix, checksums=True)


def test_truncated_bin_names_file_and_byte_counts(prefix: str) -> None:
    path = Path(f"{prefix}.bin")
    size = path.stat().st_size
    path.write_bytes(path.read_bytes()[:-4])
    with pytest.raises(DataError, match=rf"{path}: truncated: manifest expects {size} bytes, found {size - 4}$"):
        verify_dataset(prefix)


def test_bin_not_matching_its_idx_fails_even_when_the_manifest_agrees(prefix: str) -> None:
    path = Path(f"{prefix}.bin")
    size = path.stat().st_size
    path.write_bytes(path.read_bytes()[:-2])
    rewrite_manifest(prefix, bin__size=size - 2)
    with pytest.raises(
        DataError, match=rf"truncated \.bin: .*\.idx describes \d+ uint16 tokens, so expected {size} bytes"
    ):
        verify_dataset(prefix)


def test_idx_not_matching_its_header_fails_even_when_the_manifest_agrees(prefix: str) -> None:
    path = Path(f"{prefix}.idx")
    size = path.stat().st_size
    path.write_bytes(path.read_bytes()[:-8])
    rewrite_manifest(prefix, idx__size=size - 8)
    with pytest.raises(DataError, match=rf"{path}: truncated \.idx: .* expected {size} bytes, found {size - 8}"):
        verify_dataset(prefix)


def test_manifest_counts_must_match_the_index(prefix: str) -> None:
    rewrite_manifest(prefix, document_count=11)
    with pytest.raises(DataError, match=r"document_count: manifest says 11, .*\.idx says 12"):
        verify_dataset(prefix)


def test_missing_manifest_and_missing_field_are_clear(prefix: str) -> None:
    rewrite_manifest(prefix, vocab_size="big")
    with pytest.raises(DataError, match=r"manifest.json: vocab_size: 'big' is not of type <class 'int'>"):
        verify_dataset(prefix)
    manifest_path(prefix).unlink()
    with pytest.raises(DataError, match=r"manifest.json: manifest not found"):
        verify_dataset(prefix)


def test_tokenizer_must_be_the_one_the_data_was_made_with(prefix: str, tmp_path: Path) -> None:
    tokenizer = word_level_tokenizer(tmp_path / "tokenizer.json", words=1000)
    with pytest.raises(DataError, match=r"tokenizer.json: tokenizer does not match the dataset: sha256 [0-9a-f]{64}"):
        verify_dataset(prefix, tokenizer_path=tokenizer)
    rewrite_manifest(prefix, tokenizer_sha256=sha256_file(tokenizer))
    assert verify_dataset(prefix, tokenizer_path=tokenizer).vocab_size == 1000
    rewrite_manifest(prefix, vocab_size=1024)
    with pytest.raises(DataError, match=r"tokenizer vocab size 1000 does not match .*'s 1024"):
        verify_dataset(prefix, tokenizer_path=tokenizer)
