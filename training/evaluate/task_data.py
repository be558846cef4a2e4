"""`python -m training.evaluate.task_data --output DIR`: the shipped tasks (training/evaluate/tasks/*.yaml) with
their data files, built from the demo corpus, ready for `llm-stage` to a dataset prefix.

Both tasks read the corpus's last HELD_OUT_DOCUMENTS documents, which the tests' training subset (its first
documents) never sees: `demo_heldout` scores the text itself (perplexity), `demo_choice` asks which of four names
a docstring documents. The same corpus gives the same files, byte for byte (a seeded generator picks the
distractors and their order).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from spec.cli import OneLineParser, user_errors
from spec.cli_types import output_directory
from training.corpus import demo_corpus_path

TASKS_DIR = Path(__file__).resolve().parent / "tasks"
HELD_OUT_DOCUMENTS = 32
MAX_TEXT_CHARS = 1500  # a perplexity document: long enough to need context, short enough for a CPU test
MAX_DOCSTRING_CHARS = 300
MAX_CHOICE_ITEMS = 100
CHOICES = 4
SEED = 34


@dataclass(frozen=True)
class Section:
    name: str  # qualified name, e.g. zoneinfo._tzpath.find_tzfile
    docstring: str


def held_out_documents(corpus: Path) -> list[dict[str, str]]:
    rows = [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    return rows[-HELD_OUT_DOCUMENTS:]


def _is_header(paragraph: str, module: str) -> bool:
    return (paragraph == module or paragraph.startswith(module + ".")) and all(
        part.isidentifier() for part in paragraph.split(".")
    )


def sections(document: dict[str, str]) -> Iterator[Section]:
    """The corpus writes each docstring as `name`, a blank line, the docstring (training.corpus.stdlib_docstrings)."""
    module = document["source"].removeprefix("python-stdlib:")
    name: str | None = None
    body: list[str] = []
    for paragraph in document["text"].strip("\n").split("\n\n"):
        if _is_header(paragraph, module):
            if name is not None and body:
                yield Section(name, "\n\n".join(body))
            name, body = paragraph, []
        else:
            body.append(paragraph)
    if name is not None and body:
        yield Section(name, "\n\n".join(body))


def _truncated(text: str, limit: int) -> str:
    """At most `limit` characters, cut at a paragraph (else a line, else a word) boundary."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    for boundary in ("\n\n", "\n", " "):
        cut = head.rfind(boundary)
        if cut > limit // 2:
            return head[:cut]
    return head


def perplexity_rows(documents: list[dict[str, str]]) -> list[dict[str, str]]:
    return [
        {"text": _truncated(document["text"], MAX_TEXT_CHARS), "source": document["source"]} for document in documents
    ]


def choice_rows(documents: list[dict[str, str]]) -> list[dict[str, object]]:
    found = [section for document in documents for section in sections(document)]
    short_names = sorted({section.name.rsplit(".", 1)[-1] for section in found})
    generator = random.Random(SEED)
    rows: list[dict[str, object]] = []
    for section in found:
        answer = section.name.rsplit(".", 1)[-1]
        first_paragraph = section.docstring.split("\n\n", 1)[0]
        if answer.startswith("_") or answer in first_paragraph:  # the text must not hand out the answer
            continue
        distractors = generator.sample([name for name in short_names if name != answer], CHOICES - 1)
        label = generator.randrange(CHOICES)
        choices = [*distractors[:label], answer, *distractors[label:]]
        rows.append({"docstring": _truncated(first_paragraph, MAX_DOCSTRING_CHARS), "choices": choices, "label": label})
        if len(rows) == MAX_CHOICE_ITEMS:
            break
    return rows


def _write_jsonl(path: Path, rows: list[dict[str, object]] | list[dict[str, str]]) -> None:
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    partial.write_text("".join(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n" for row in rows), "utf-8")
    os.replace(partial, path)


def build_task_data(output: Path, corpus: Path | None = None) -> list[Path]:
    """The shipped YAMLs and their JSONL data in `output`; returns the files written."""
    documents = held_out_documents(corpus or demo_corpus_path())
    output.mkdir(parents=True, exist_ok=True)
    written = []
    for yaml_file in sorted(TASKS_DIR.glob("*.yaml")):
        shutil.copyfile(yaml_file, output / yaml_file.name)
        written.append(output / yaml_file.name)
    _write_jsonl(output / "demo_heldout.jsonl", perplexity_rows(documents))
    _write_jsonl(output / "demo_choice.jsonl", choice_rows(documents))
    return [*written, output / "demo_heldout.jsonl", output / "demo_choice.jsonl"]


@user_errors
def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m training.evaluate.task_data", description=__doc__.splitlines()[0])
    parser.add_argument("--output", required=True, type=output_directory, help="directory for the YAMLs and data")
    args = parser.parse_args(argv)
    for path in build_task_data(Path(args.output)):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
