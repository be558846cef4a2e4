from pathlib import Path

import pytest

from training.data.errors import DataError
from training.data.sources import iter_documents, resolve_inputs


def test_jsonl_and_text_files_in_order(tmp_path: Path) -> None:
    (tmp_path / "b.txt").write_text("whole file\nis one document\n")
    (tmp_path / "a.jsonl").write_text('{"text": "first"}\n\n{"text": "second", "id": 2}\n')
    files = resolve_inputs([tmp_path])
    assert [f.name for f in files] == ["a.jsonl", "b.txt"]
    assert list(iter_documents(files)) == [(0, "first"), (0, "second"), (1, "whole file\nis one document\n")]


def test_other_text_field(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"content": "x"}\n')
    assert list(iter_documents(resolve_inputs([tmp_path / "a.jsonl"]), "content")) == [(0, "x")]


def test_line_without_the_text_field_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text('{"text": "ok"}\n{"body": "no text"}\n')
    with pytest.raises(DataError, match=rf"^{path}:2: no 'text' field \(--text-field text\)$"):
        list(iter_documents([path]))


@pytest.mark.parametrize(
    ("line", "message"),
    [('{"text": 5}', r":1: field 'text' is int, expected a string"), ("{not json", r":1: not valid JSON")],
)
def test_bad_jsonl_lines(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(DataError, match=message):
        list(iter_documents([path]))


def test_bad_inputs(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"--input: .*missing.jsonl: no such file or directory"):
        resolve_inputs([tmp_path / "missing.jsonl"])
    (tmp_path / "data.csv").write_text("a,b\n")
    with pytest.raises(DataError, match=r"--input: .*data.csv: unsupported file type '.csv'"):
        resolve_inputs([tmp_path / "data.csv"])
    with pytest.raises(DataError, match=r"directory holds no .jsonl, .json or .txt files"):
        resolve_inputs([tmp_path])
