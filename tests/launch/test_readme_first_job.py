"""README's "First job on the cluster", its llm-prepare and llm-submit lines run as written (the head node's paths
mapped to a temporary directory) against the default spec: the corpus cache stays out of the release tree, the
first job renders for one 8-GPU p5 node, and the real model on the demo corpus is refused at submission, as README
says, instead of dying at start."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from launch import submit
from tests.runbook.blocks import blocks_in
from training import prepare

REPO = Path(__file__).resolve().parents[2]


def _first_job_commands() -> list[list[str]]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## First job on the cluster", 1)[1].split("\n## ", 1)[0]
    # The section's first-job block; a later one prepares a large corpus on the cluster.
    (block,) = [
        b for b in blocks_in(REPO / "README.md", section) if b.tag == "head-node" and "llm-submit" in b.script()
    ]
    script = block.script().replace("\\\n", " ")
    return [shlex.split(line, comments=True) for line in script.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def commands(tmp_path_factory: pytest.TempPathFactory) -> list[list[str]]:
    fsx = tmp_path_factory.mktemp("fsx")
    home = str(REPO)
    return [
        [word.replace("$LLM_TRAINING_HOME", home).replace("/fsx/", f"{fsx}/") for word in command]
        for command in _first_job_commands()
    ]


def _the(commands: list[list[str]], program: str, needle: str) -> list[str]:
    (command,) = [c for c in commands if c and c[0] == program and needle in " ".join(c)]
    return command[1:]


def test_readmes_first_job_renders_and_the_real_model_on_the_demo_corpus_is_refused(
    commands: list[list[str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # the user's cache: a fresh one
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("LLM_TRAINING_SPEC", raising=False)
    before = sorted(p.name for p in (REPO / "build").glob("*")) if (REPO / "build").is_dir() else []
    assert prepare.main([*_the(commands, "llm-prepare", "--demo-corpus"), "--workers", "1"]) == 0
    assert list((tmp_path / "home" / ".cache" / "llm-training" / "corpus").glob("*.jsonl"))
    after = sorted(p.name for p in (REPO / "build").glob("*")) if (REPO / "build").is_dir() else []
    assert after == before  # nothing written into the release tree
    capsys.readouterr()

    first = _the(commands, "llm-submit", "tiny-gpu.yaml")
    assert submit.main([*first, "--dry-run"]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "#SBATCH --partition=gpu" in out and "NPROC_PER_NODE=8" in out

    real = _the(commands, "llm-submit", "llama3-8b.yaml")
    corpus = real[real.index("--data-prefix") + 1]
    demo = corpus.replace("corpus_text_document", "demo_text_document")
    real[real.index("--data-prefix") + 1] = demo
    assert submit.main([*real, "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --data-prefix: {demo}: the validation split (") and err.count("\n") == 1
    assert "is shorter than one sample of data.seq_len + 1 = 8193 tokens" in err
