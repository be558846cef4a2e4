"""Merging prepared shards: byte-identical to one `prepare` over all their inputs, and to megatron-core's add_index."""

import warnings
from pathlib import Path

import numpy as np
import pytest

from training.corpus import demo_corpus_path
from training.data.errors import DataError
from training.data.indexed import bin_path, idx_path
from training.data.manifest import manifest_path, read_manifest
from training.data.merge import merge_datasets
from training.prepare import prepare_dataset


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], Path]:
    """Three JSONL files of demo documents and a tokenizer trained on them."""
    directory = tmp_path_factory.mktemp("merge-corpus")
    lines = demo_corpus_path().read_text(encoding="utf-8").splitlines()[:90]
    files = []
    for index, start in enumerate((0, 20, 50)):
        path = directory / f"part-{index}.jsonl"
        path.write_text("\n".join(lines[start : start + (20 if index == 0 else 30 if index == 1 else 40)]) + "\n")
        files.append(path)
    trained = prepare_dataset(files, directory / "trained", vocab_size_to_train=400, workers=1, show_progress=False)
    return files, trained.tokenizer_path


def _prepare(files: list[Path], prefix: Path, tokenizer: Path) -> Path:
    return prepare_dataset(files, prefix, tokenizer_path=tokenizer, workers=1, show_progress=False).data_prefix


def test_merged_shards_are_byte_identical_to_one_process(corpus: tuple[list[Path], Path], tmp_path: Path) -> None:
    files, tokenizer = corpus
    whole = _prepare(files, tmp_path / "whole", tokenizer)
    shards = [
        _prepare(files[:1], tmp_path / "shard-0", tokenizer),
        _prepare(files[1:], tmp_path / "shard-1", tokenizer),
    ]
    merged = tmp_path / "merged" / whole.name  # the same name, so the manifests can be equal
    merge_datasets(shards, merged)
    assert bin_path(merged).read_bytes() == bin_path(whole).read_bytes()
    assert idx_path(merged).read_bytes() == idx_path(whole).read_bytes()
    whole_manifest = read_manifest(manifest_path(whole))
    assert read_manifest(manifest_path(merged)) == whole_manifest
    assert [Path(source.path) for source in whole_manifest.sources] == files


def test_merge_matches_megatron_core_add_index(corpus: tuple[list[Path], Path], tmp_path: Path) -> None:
    files, tokenizer = corpus
    shards = [_prepare([path], tmp_path / f"shard-{i}", tokenizer) for i, path in enumerate(files)]
    merged = tmp_path / "merged_text_document"
    merge_datasets(shards, merged)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder
    oracle = tmp_path / "oracle_text_document"
    builder = IndexedDatasetBuilder(str(bin_path(oracle)), dtype=np.uint16)
    for shard in shards:
        builder.add_index(str(shard))
    builder.finalize(str(idx_path(oracle)))
    assert bin_path(merged).read_bytes() == bin_path(oracle).read_bytes()
    assert idx_path(merged).read_bytes() == idx_path(oracle).read_bytes()


def test_a_shard_whose_bytes_changed_is_named_and_nothing_is_left(
    corpus: tuple[list[Path], Path], tmp_path: Path
) -> None:
    files, tokenizer = corpus
    shards = [_prepare([path], tmp_path / f"shard-{i}", tokenizer) for i, path in enumerate(files[:2])]
    data = bytearray(bin_path(shards[1]).read_bytes())
    data[10] ^= 1  # same size: only the checksum read while copying can tell
    bin_path(shards[1]).write_bytes(bytes(data))
    merged = tmp_path / "merged_text_document"
    with pytest.raises(DataError, match=rf"{bin_path(shards[1])}: sha256 mismatch"):
        merge_datasets(shards, merged)
    assert sorted(p.name for p in tmp_path.glob("merged*")) == []


def test_shards_of_different_tokenizers_are_refused(corpus: tuple[list[Path], Path], tmp_path: Path) -> None:
    files, tokenizer = corpus
    first = _prepare(files[:1], tmp_path / "shard-0", tokenizer)
    other = prepare_dataset(files[1:2], tmp_path / "shard-1", vocab_size_to_train=300, workers=1, show_progress=False)
    with pytest.raises(DataError, match=r"shard-1_text_document.manifest.json: tokenizer_sha256: .* differs"):
        merge_datasets([first, other.data_prefix], tmp_path / "merged_text_document")
