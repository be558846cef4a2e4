"""Check a prepared dataset against its manifest before training reads a single token from it."""

from pathlib import Path

from training.data.errors import DataError
from training.data.indexed import bin_path, check_bin_size, idx_path, read_index
from training.data.manifest import DatasetManifest, FileRecord, manifest_path, read_manifest, sha256_file


def verify_dataset(
    prefix: str | Path, tokenizer_path: str | Path | None = None, *, checksums: bool = False
) -> DatasetManifest:
    """Verify `<prefix>.{bin,idx}` against `<prefix>.manifest.json` and return the manifest.

    Always: file sizes against the manifest, the .idx header against its own size, the .bin size against what the
    .idx describes, and the manifest's counts and dtype against the .idx. With `checksums`, also the sha256 of
    both files (reads them whole, so it is opt-in). With `tokenizer_path`, the tokenizer.json must be the one the
    data was tokenized with (same sha256 and vocabulary size).
    """
    manifest = read_manifest(manifest_path(prefix))
    for record, path in ((manifest.idx, idx_path(prefix)), (manifest.bin, bin_path(prefix))):
        check_file_record(record, path, checksums=checksums)
    index = read_index(idx_path(prefix))
    check_bin_size(bin_path(prefix), index)
    where = manifest_path(prefix)
    for name, recorded, actual in (
        ("dtype", manifest.dtype, index.dtype.name),
        ("document_count", manifest.document_count, index.document_count),
        ("token_count", manifest.token_count, index.token_count),
    ):
        if recorded != actual:
            raise DataError(f"{where}: {name}: manifest says {recorded}, {index.path.name} says {actual}")
    if tokenizer_path is not None:
        check_tokenizer(manifest, Path(tokenizer_path), where)
    return manifest


def check_file_record(record: FileRecord, path: Path, *, checksums: bool) -> None:
    """Size always; sha256 only when asked. Errors name the file and the expected and actual values."""
    if not path.is_file():
        raise DataError(f"{path}: file not found (listed in the manifest as {record.name})")
    actual_size = path.stat().st_size
    if actual_size != record.size:
        state = "truncated" if actual_size < record.size else "oversized"
        raise DataError(f"{path}: {state}: manifest expects {record.size} bytes, found {actual_size}")
    if checksums:
        actual_sha = sha256_file(path)
        if actual_sha != record.sha256:
            raise DataError(f"{path}: sha256 mismatch: manifest expects {record.sha256}, found {actual_sha}")


def check_tokenizer(manifest: DatasetManifest, tokenizer_path: Path, where: Path) -> None:
    from training.data.tokenizer import load_tokenizer

    if not tokenizer_path.is_file():
        raise DataError(f"{tokenizer_path}: tokenizer file not found")
    actual_sha = sha256_file(tokenizer_path)
    if actual_sha != manifest.tokenizer_sha256:
        raise DataError(
            f"{tokenizer_path}: tokenizer does not match the dataset: sha256 {actual_sha}, "
            f"but {where.name} was tokenized with {manifest.tokenizer_sha256}"
        )
    vocab_size = load_tokenizer(tokenizer_path).get_vocab_size(with_added_tokens=True)
    if vocab_size != manifest.vocab_size:
        raise DataError(
            f"{tokenizer_path}: tokenizer vocab size {vocab_size} does not match {where.name}'s {manifest.vocab_size}"
        )
