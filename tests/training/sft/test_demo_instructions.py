import json
from pathlib import Path

from training.sft.demo_instructions import DEMO_ROWS, build_instructions, instruction_rows
from training.sft.rows import messages_of


def test_the_demo_instruction_set_is_a_few_hundred_valid_rows_built_the_same_every_time(tmp_path: Path) -> None:
    first = build_instructions(tmp_path / "a.jsonl").read_bytes()
    assert first == build_instructions(tmp_path / "b.jsonl").read_bytes()
    rows = [json.loads(line) for line in first.decode().splitlines()]
    assert len(rows) == DEMO_ROWS >= 200
    for number, row in enumerate(rows, start=1):
        messages_of(row, f"demo:{number}")  # every row is one the SFT reader accepts
    assert {"prompt", "response"} <= set(rows[0]) and "messages" in rows[3]


def test_answers_are_first_sentences_of_the_docstrings_they_name() -> None:
    rows = list(instruction_rows())
    assert rows[0]["response"].endswith(".")
    assert all(len(row["response"].split()) >= 4 for row in rows if "response" in row)
    assert len({row.get("prompt") or row["messages"][-2]["content"] for row in rows}) == len(rows)  # no duplicates
