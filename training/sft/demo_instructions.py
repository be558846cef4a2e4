"""The demo instruction set: questions about standard-library names, answered by their docstrings' first sentence.

Built from the same docstrings as the demo corpus (training/corpus), so a model pretrained on that corpus has seen
the answers as text and fine-tuning teaches it the question-and-answer form. Deterministic for one Python version,
written on first use into the corpus cache; every fourth row is a chat row (`messages`, with a system message) so
that both row formats run in the demo.

    python -m training.sft.demo_instructions --output build/sft/demo-instructions.jsonl
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from spec.cli import OneLineParser, user_errors
from training.corpus import corpus_file_name, default_cache_dir
from training.corpus.stdlib_docstrings import iter_docstrings

DEMO_ROWS = 400
MIN_WORDS, MAX_WORDS = 4, 40
QUESTIONS = ("What does `{name}` do?", "Explain `{name}` in one sentence.", "In one sentence, what is `{name}` for?")
SYSTEM = "Answer with one sentence from the Python documentation."


def first_sentence(docstring: str) -> str | None:
    """The first sentence of the first paragraph, whitespace collapsed; None when it is too short or too long."""
    paragraph = " ".join(docstring.split("\n\n")[0].split())
    end = paragraph.find(". ")
    sentence = paragraph if end < 0 else paragraph[: end + 1]
    words = len(sentence.split())
    if not sentence.endswith(".") or not MIN_WORDS <= words <= MAX_WORDS:
        return None
    return sentence


def instruction_rows(count: int = DEMO_ROWS) -> Iterator[dict[str, Any]]:
    made = 0
    for name, docstring in iter_docstrings():
        answer = first_sentence(docstring)
        if answer is None or "." not in name:  # module docstrings are pretraining's headings, not questions
            continue
        question = QUESTIONS[made % len(QUESTIONS)].format(name=name)
        if made % 4 == 3:
            yield {
                "messages": [
                    {"role": "system", "content": SYSTEM},
                    {"role": "user", "content": question},
                    {"role": "assistant", "content": answer},
                ]
            }
        else:
            yield {"prompt": question, "response": answer}
        made += 1
        if made == count:
            return


def build_instructions(output: str | Path) -> Path:
    """Write the rows as JSONL, under a temporary name first."""
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(f"{output.name}.{os.getpid()}.partial")
    with partial.open("w", encoding="utf-8") as handle:
        for row in instruction_rows():
            handle.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
    os.replace(partial, output)
    return output


def demo_instructions_path(cache_dir: str | Path | None = None) -> Path:
    """The instruction set beside the demo corpus in the user's cache, written on first use."""
    path = Path(cache_dir or default_cache_dir()) / corpus_file_name().replace("docstrings", "instructions")
    if not path.is_file():
        build_instructions(path)
    return path


@user_errors
def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m training.sft.demo_instructions", description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", required=True, metavar="FILE.jsonl", help="where to write the rows")
    path = build_instructions(parser.parse_args(argv).output)
    print(f"wrote {path}: {DEMO_ROWS} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
