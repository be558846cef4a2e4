"""The shipped tasks' data: built from the demo corpus's held-out tail, the same bytes every time."""

import json
from pathlib import Path

from tests.training.jobs import DEMO_DOCUMENTS
from training.corpus import demo_corpus_path
from training.evaluate.task_data import CHOICES, HELD_OUT_DOCUMENTS, build_task_data
from training.evaluate.task_files import check_tasks


def test_the_task_data_is_deterministic_and_held_out_from_the_tests_training_documents(tmp_path: Path) -> None:
    first = build_task_data(tmp_path / "a")
    second = build_task_data(tmp_path / "b")
    assert [p.name for p in first] == [
        "demo_choice.yaml",
        "demo_heldout.yaml",
        "demo_heldout.jsonl",
        "demo_choice.jsonl",
    ]
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(first, second, strict=True))
    corpus = [json.loads(line) for line in demo_corpus_path().read_text(encoding="utf-8").splitlines()]
    assert len(corpus) - HELD_OUT_DOCUMENTS >= DEMO_DOCUMENTS  # the tests train on the corpus's first documents
    trained = {row["source"] for row in corpus[:DEMO_DOCUMENTS]}
    heldout = [json.loads(line) for line in (tmp_path / "a" / "demo_heldout.jsonl").read_text().splitlines()]
    assert len(heldout) == HELD_OUT_DOCUMENTS and not trained & {row["source"] for row in heldout}
    choices = [json.loads(line) for line in (tmp_path / "a" / "demo_choice.jsonl").read_text().splitlines()]
    assert len(choices) >= 50
    for row in choices:
        assert len(set(row["choices"])) == CHOICES and 0 <= row["label"] < CHOICES
        assert row["choices"][row["label"]] not in row["docstring"]
    assert sorted(check_tasks(tmp_path / "a", ["demo_heldout", "demo_choice"])) == ["demo_choice", "demo_heldout"]
