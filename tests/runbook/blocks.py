"""Fenced blocks of the docs with their tags: ```bash here|aws|head-node [long] for commands, a language (text,
yaml, python, json, mermaid) for everything else."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")))
WHERE = ("here", "aws", "head-node")
LANGUAGES = frozenset({"bash", "text", "yaml", "python", "json", "mermaid"})
# `long`: a `here` block that is the test suite itself or takes tens of minutes: dry-run (make -n, pytest
# --collect-only, our commands' argument parsers) instead of run.
MODIFIERS = frozenset({"long"})
_FENCE = re.compile(r"^(?P<indent> *)```(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.S | re.M)


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    info: str
    body: str

    @property
    def where(self) -> str:
        name = self.path.relative_to(REPO) if self.path.is_relative_to(REPO) else self.path.name
        return f"{name}:{self.line}"

    @property
    def words(self) -> list[str]:
        return self.info.split()

    @property
    def language(self) -> str:
        return self.words[0] if self.words else ""

    @property
    def tag(self) -> str:
        """here, aws or head-node for a bash block ('' when missing)."""
        return self.words[1] if self.language == "bash" and len(self.words) > 1 else ""

    @property
    def long(self) -> bool:
        return "long" in self.words[2:]

    def problem(self) -> str | None:
        """Why the fence's info string is not one this repo's doc test knows, or None."""
        if self.language not in LANGUAGES:
            return f"{self.where}: fence '```{self.info}' names no known language ({', '.join(sorted(LANGUAGES))})"
        if self.language != "bash":
            return None if len(self.words) == 1 else f"{self.where}: '```{self.info}': only bash blocks take tags"
        if self.tag not in WHERE:
            return f"{self.where}: '```{self.info}' says not where it runs: ```bash {' | '.join(WHERE)}"
        extra = set(self.words[2:]) - MODIFIERS
        if extra or (self.long and self.tag != "here"):
            return f"{self.where}: '```{self.info}': unknown modifier (only `here` blocks may be `long`)"
        return None

    def script(self) -> str:
        """The block as bash reads it, its indentation (a list item's) removed."""
        lines = self.body.splitlines()
        indent = min((len(line) - len(line.lstrip(" ")) for line in lines if line.strip()), default=0)
        return "\n".join(line[indent:] for line in lines) + "\n"


def blocks_in(path: Path, text: str | None = None) -> list[Block]:
    text = path.read_text(encoding="utf-8") if text is None else text
    return [
        Block(path, text.count("\n", 0, match.start()) + 1, match["info"].strip(), match["body"])
        for match in _FENCE.finditer(text)
    ]


def all_blocks() -> list[Block]:
    return [block for path in DOCS for block in blocks_in(path)]


def shell_blocks(tag: str) -> list[Block]:
    return [block for block in all_blocks() if block.language == "bash" and block.tag == tag]
