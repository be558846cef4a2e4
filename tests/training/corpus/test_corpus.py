import json
from pathlib import Path

import pytest

import training.corpus
from tests.training.corpus.test_stdlib_docstrings import fake_stdlib
from training.corpus import build_corpus, corpus_file_name, default_cache_dir, demo_corpus_path
from training.corpus.__main__ import main


def test_built_on_first_use_and_reused(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    calls: list[Path] = []
    monkeypatch.setattr("training.corpus.build_corpus", lambda path: calls.append(path) or build_small(path))
    path = demo_corpus_path(tmp_path)
    assert path == tmp_path / corpus_file_name() and path.is_file()
    assert demo_corpus_path(tmp_path) == path
    assert calls == [path]


def build_small(path: Path) -> Path:
    path.write_text(json.dumps({"text": "x", "source": "python-stdlib:x"}) + "\n")
    return path


def test_the_same_tree_gives_the_same_bytes(tmp_path: Path) -> None:
    first = build_corpus(tmp_path / "a.jsonl", fake_stdlib(tmp_path / "one"))
    second = build_corpus(tmp_path / "b.jsonl", fake_stdlib(tmp_path / "two"))
    assert first.read_bytes() == second.read_bytes()
    records = [json.loads(line) for line in first.read_text().splitlines()]
    assert [r["source"] for r in records] == ["python-stdlib:pkg", "python-stdlib:widgets"]
    assert not list(tmp_path.glob("*.partial"))


def test_cli_writes_the_corpus(tmp_path: Path, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    root = fake_stdlib(tmp_path / "lib")
    monkeypatch.setattr("training.corpus.stdlib_docstrings.stdlib_root", lambda: root)
    assert main(["--output", str(tmp_path / "corpus.jsonl")]) == 0
    assert "2 documents" in capsys.readouterr().out
    records = [json.loads(line) for line in (tmp_path / "corpus.jsonl").read_text().splitlines()]
    assert [r["source"] for r in records] == ["python-stdlib:pkg", "python-stdlib:widgets"]


def test_the_stdlib_corpus_has_every_module_once_and_over_a_megabyte() -> None:
    """On the demo corpus the job fixtures read (the user's cache, built once per machine), not a fresh build."""
    records = [json.loads(line) for line in demo_corpus_path().read_text(encoding="utf-8").splitlines()]
    sources = [r["source"] for r in records]
    assert "python-stdlib:json" in sources and len(sources) == len(set(sources))
    assert sum(len(r["text"]) for r in records) > 1_000_000


def test_the_default_cache_is_the_users_not_the_release_tree(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # On the head node the release tree is root's: llm-prepare --demo-corpus wrote build/corpus inside it.
    repo = Path(training.corpus.__file__).resolve().parents[2]
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "llm-training" / "corpus"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "llm-training" / "corpus"
    assert not default_cache_dir().is_relative_to(repo)
