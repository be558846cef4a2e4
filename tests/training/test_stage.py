"""training.stage against a moto S3 server over real HTTP (moto cannot model access point ARNs: see docs/data.md)."""

import logging
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from moto.server import ThreadedMotoServer

from training.data.manifest import sha256_file
from training.data.tokenizer import train_byte_level_bpe, vocab_size
from training.data.verify import verify_dataset
from training.data.writer import TokenizerInfo, write_dataset
from training.stage import MIB, StageError, default_transfer_config, main, make_client, parse_bucket, stage_prefix

BUCKET = "llm-demo-data"
PREFIX = "datasets/demo/"
CHUNK = MIB // 4


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one access-log line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")}
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_SESSION_TOKEN="testing")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real prepared dataset of about 1.2 MB (several ranged GETs at 256 KiB), its tokenizer and an extra file."""
    root = tmp_path_factory.mktemp("source")
    tokenizer = train_byte_level_bpe(["staging test text"] * 10, vocab_size=300)
    tokenizer_path = root / "demo_tokenizer.json"
    tokenizer.save(str(tokenizer_path))
    source = root / "raw.txt"
    source.write_text("synthetic\n")
    vocab = vocab_size(tokenizer)
    info = TokenizerInfo(sha256_file(tokenizer_path), vocab, 0, "<|endoftext|>", file_name=tokenizer_path.name)
    rng = np.random.default_rng(0)
    documents = ((0, rng.integers(1, vocab, size=int(rng.integers(100, 2000)))) for _ in range(600))
    write_dataset(root / "demo_text_document", documents, info, [source])
    source.unlink()
    (root / "notes").mkdir()
    (root / "notes" / "README.txt").write_text("nested keys land in subdirectories\n")
    return root


@pytest.fixture
def client(endpoint: str, dataset: Path) -> Any:
    s3 = make_client("us-east-1", endpoint, max_concurrency=4)
    existing = [b["Name"] for b in s3.list_buckets()["Buckets"]]
    if BUCKET not in existing:
        s3.create_bucket(Bucket=BUCKET)
        for path in sorted(dataset.rglob("*")):
            if path.is_file():
                s3.upload_file(str(path), BUCKET, PREFIX + path.relative_to(dataset).as_posix())
    return s3


def record_ranged_gets(client: Any) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    client.meta.events.register("provide-client-params.s3.GetObject", lambda params, **_: calls.append(dict(params)))
    return calls


def test_stage_copies_the_prefix_with_ranged_gets_and_verifies(client: Any, dataset: Path, tmp_path: Path) -> None:
    gets = record_ranged_gets(client)
    config = default_transfer_config(max_concurrency=4, multipart_chunksize=CHUNK, multipart_threshold=CHUNK)
    result = stage_prefix(client, BUCKET, PREFIX, tmp_path / "fsx", transfer_config=config)
    staged = sorted(p.relative_to(tmp_path / "fsx").as_posix() for p in (tmp_path / "fsx").rglob("*") if p.is_file())
    expected = sorted(p.relative_to(dataset).as_posix() for p in dataset.rglob("*") if p.is_file())
    assert staged == expected == sorted(result.downloaded) and result.skipped == []
    for name in expected:
        assert (tmp_path / "fsx" / name).read_bytes() == (dataset / name).read_bytes()
    assert result.verified == ["demo_text_document"]
    bin_ranges = [call for call in gets if call["Key"].endswith(".bin") and "Range" in call]
    assert len(bin_ranges) >= (dataset / "demo_text_document.bin").stat().st_size // CHUNK
    verify_dataset(tmp_path / "fsx" / "demo_text_document", tmp_path / "fsx" / "demo_tokenizer.json", checksums=True)


class Interrupted(Exception):
    """Stands in for Ctrl-C or a lost node in the middle of staging."""


def test_interrupted_stage_resumes_without_fetching_complete_files_again(client: Any, tmp_path: Path) -> None:
    dest = tmp_path / "fsx"
    config = default_transfer_config(max_concurrency=2, multipart_chunksize=CHUNK, multipart_threshold=CHUNK)
    completed: list[str] = []

    def interrupt_after_two(relative: str) -> None:
        completed.append(relative)
        if len(completed) == 2:
            raise Interrupted

    with pytest.raises(Interrupted):
        stage_prefix(client, BUCKET, PREFIX, dest, transfer_config=config, on_file_done=interrupt_after_two)
    complete_before = {name: (dest / name).stat() for name in completed}
    leftovers = sorted(p.name for p in dest.rglob("*.partial"))
    assert leftovers, "the interruption left no .partial file, so it tested nothing"
    (dest / "demo_text_document.bin.partial").write_bytes(b"stale bytes from an earlier crash")

    gets = record_ranged_gets(client)
    result = stage_prefix(client, BUCKET, PREFIX, dest, transfer_config=config)
    assert sorted(result.skipped) == sorted(completed)
    assert not set(result.downloaded) & set(completed)
    assert {call["Key"].removeprefix(PREFIX) for call in gets}.isdisjoint(completed)
    for name, stat in complete_before.items():
        assert (dest / name).stat().st_mtime_ns == stat.st_mtime_ns and (dest / name).stat().st_ino == stat.st_ino
    assert not list(dest.rglob("*.partial"))
    assert result.verified == ["demo_text_document"]

    again = stage_prefix(client, BUCKET, PREFIX, dest, transfer_config=config)
    assert again.downloaded == [] and len(again.skipped) == 5


def test_checksum_mismatch_deletes_the_bad_file_and_says_so(client: Any, dataset: Path, tmp_path: Path) -> None:
    corrupt = bytearray((dataset / "demo_text_document.bin").read_bytes())
    corrupt[100] ^= 0xFF
    for name in ("demo_text_document.idx", "demo_text_document.manifest.json"):
        client.upload_file(str(dataset / name), BUCKET, f"corrupt/{name}")
    client.put_object(Bucket=BUCKET, Key="corrupt/demo_text_document.bin", Body=bytes(corrupt))
    dest = tmp_path / "fsx"
    with pytest.raises(StageError, match=r"demo_text_document.bin: sha256 mismatch: manifest expects [0-9a-f]{64}"):
        stage_prefix(client, BUCKET, "corrupt/", dest)
    assert not (dest / "demo_text_document.bin").exists()
    assert (dest / "demo_text_document.idx").exists()


def test_listing_errors_are_one_line(client: Any, tmp_path: Path) -> None:
    with pytest.raises(StageError, match=rf"{BUCKET}/nothing/: no objects under this prefix"):
        stage_prefix(client, BUCKET, "nothing/", tmp_path)
    with pytest.raises(StageError, match=r"no-such-bucket/x/: cannot list objects: NoSuchBucket"):
        stage_prefix(client, "no-such-bucket", "x/", tmp_path)


def test_cli(client: Any, endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--access-point-arn", BUCKET, "--prefix", PREFIX + "demo_text_document", "--dest", str(tmp_path)]
    assert main([*argv, "--endpoint-url", endpoint, "--region", "us-east-1"]) == 0
    out = capsys.readouterr().out
    assert "3 downloaded, 0 already complete; verified demo_text_document" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "demo_text_document.bin",
        "demo_text_document.idx",
        "demo_text_document.manifest.json",
    ]
    assert main(["--access-point-arn", "arn:aws:s3:::bucket", "--prefix", "x", "--dest", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --access-point-arn: 'arn:aws:s3:::bucket' is neither") and err.count("\n") == 1


def test_access_point_arns_carry_their_region() -> None:
    arn = "arn:aws:s3:eu-west-1:222222222222:accesspoint/llm-data"
    assert parse_bucket(arn) == (arn, "eu-west-1")
    assert parse_bucket("llm-data-abcdefgh1234567890-s3alias") == ("llm-data-abcdefgh1234567890-s3alias", None)
    with pytest.raises(StageError, match=r"--access-point-arn: 'Bad_Bucket'"):
        parse_bucket("Bad_Bucket")
