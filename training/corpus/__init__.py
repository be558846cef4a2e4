"""The demo corpus: standard-library docstrings as JSONL, built on first use (nothing large lives in git).

python -m training.corpus --output build/corpus/stdlib.jsonl

The cache is the user's (`$XDG_CACHE_HOME/llm-training/corpus`, else `~/.cache/llm-training/corpus`), never the
release tree: on the head node that tree is root's and read-only to the users who run `llm-prepare`.
"""

import json
import os
import sys
from pathlib import Path

from training.corpus.stdlib_docstrings import iter_module_documents


def default_cache_dir() -> Path:
    """Where the corpus is cached when no directory is named: the user's cache, never the release tree."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "llm-training" / "corpus"


def corpus_file_name() -> str:
    """Named by Python version: the corpus is deterministic for one version and differs between versions."""
    version = sys.version_info
    return f"stdlib-docstrings-py{version.major}.{version.minor}.{version.micro}.jsonl"


def build_corpus(output: str | Path, stdlib_root: Path | None = None) -> Path:
    """Write the corpus as JSONL ({"text", "source"} per line); written to a temporary name, then renamed."""
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(f"{output.name}.{os.getpid()}.partial")
    with partial.open("w", encoding="utf-8") as handle:
        for document in iter_module_documents(stdlib_root):
            record = {"text": document.text, "source": f"python-stdlib:{document.module}"}
            handle.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
    os.replace(partial, output)
    return output


def demo_corpus_path(cache_dir: str | Path | None = None) -> Path:
    """The corpus file, written on first use; concurrent first uses each write a whole file and one wins."""
    path = Path(cache_dir or default_cache_dir()) / corpus_file_name()
    if not path.is_file():
        build_corpus(path)
    return path
