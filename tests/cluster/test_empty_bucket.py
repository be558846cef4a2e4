"""cluster.empty_bucket against moto's S3 (the same API calls, answered offline): a versioned bucket with more
versions than one DeleteObjects request takes ends empty, and delete-bucket then succeeds."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster import empty_bucket
from cluster.empty_bucket import DELETE_BATCH, main

BUCKET = "llm-demo-artifacts-111111111111"


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Any]:
    import boto3
    from moto import mock_aws

    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        yield client


def _fill(s3: Any, keys: int) -> None:
    """Each key twice (two versions), then deleted (a delete marker on top): three entries a key."""
    for index in range(keys):
        key = f"wheelhouse/py3.11/w{index}.whl"
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"1")
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"2")
        s3.delete_object(Bucket=BUCKET, Key=key)


def test_every_version_and_delete_marker_goes_and_the_bucket_can_then_be_deleted(
    s3: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from botocore.exceptions import ClientError

    _fill(s3, 400)  # 1,200 entries: two DeleteObjects requests
    assert s3.list_objects_v2(Bucket=BUCKET)["KeyCount"] == 0  # what `aws s3 ls` shows: nothing, yet ...
    with pytest.raises(ClientError, match="BucketNotEmpty"):
        s3.delete_bucket(Bucket=BUCKET)
    assert main([BUCKET]) == 0
    assert (
        capsys.readouterr().out
        == f"s3://{BUCKET} holds 800 object versions and 400 delete markers; --yes deletes them\n"
    )
    assert len(list(empty_bucket.versions(s3, BUCKET))) == 1200  # counting deletes nothing
    assert main([BUCKET, "--yes"]) == 0
    assert "deleted 800 object versions and 400 delete markers" in capsys.readouterr().err
    assert list(empty_bucket.versions(s3, BUCKET)) == []
    s3.delete_bucket(Bucket=BUCKET)


def test_deletions_go_a_thousand_per_request(s3: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _fill(s3, 700)
    sizes: list[int] = []
    real = s3.delete_objects

    def counting(**kwargs: Any) -> Any:
        sizes.append(len(kwargs["Delete"]["Objects"]))
        return real(**kwargs)

    monkeypatch.setattr(s3, "delete_objects", counting)
    empty_bucket.delete_all(s3, BUCKET, list(empty_bucket.versions(s3, BUCKET)))
    assert sizes == [DELETE_BATCH, DELETE_BATCH, 100]


def test_a_refused_deletion_is_one_line_naming_the_key(s3: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _fill(s3, 1)

    def refusing(**kwargs: Any) -> Any:
        first = kwargs["Delete"]["Objects"][0]
        return {"Errors": [{**first, "Code": "AccessDenied", "Message": "Access Denied"}]}

    monkeypatch.setattr(s3, "delete_objects", refusing)
    with pytest.raises(empty_bucket.UserError) as refused:
        empty_bucket.delete_all(s3, BUCKET, list(empty_bucket.versions(s3, BUCKET)))
    (line,) = str(refused.value).splitlines()
    assert "'wheelhouse/py3.11/w0.whl'" in line and "AccessDenied" in line


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["no-such-bucket", "--yes"], "bucket: 'no-such-bucket': NoSuchBucket"),
        ([f"s3://{BUCKET}/"], f"bucket: 's3://{BUCKET}/' is not a bucket name"),
        ([BUCKET, "--profile", "compute"], "--profile: 'compute' is not a profile"),
    ],
)
def test_bad_input_is_one_line_naming_it(
    s3: Any, argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: {says}"), line
