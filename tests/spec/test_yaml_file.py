"""spec.yaml_file: every YAML file the repo reads (the spec, a job config) is refused in one line naming the file
when it is not UTF-8 text, is not YAML, or expands past a bound (an alias bomb), fast and without the memory."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from spec.errors import SpecError
from spec.yaml_file import MAX_EXPANDED_NODES, read_yaml

NOT_UTF8 = {
    "latin-1": "name: caf\u00e9\n".encode("latin-1"),
    "utf-16": "name: demo\n".encode("utf-16"),
    "binary": bytes(range(256)) * 4,
}


def alias_bomb(levels: int = 12, width: int = 9) -> str:
    """The billion laughs: each level lists the one before `width` times, width**levels strings in all."""
    lines = ["a0: &a0 [lol]"]
    for level in range(1, levels):
        aliases = ", ".join([f"*a{level - 1}"] * width)
        lines.append(f"a{level}: &a{level} [{aliases}]")
    return "\n".join(lines) + "\n"


def refusal(path: Path) -> str:
    with pytest.raises(SpecError) as caught:
        read_yaml(path, "<file>", SpecError)
    message = str(caught.value)
    assert len(message.splitlines()) == 1, message
    assert str(path) in message
    return message


@pytest.mark.parametrize("encoding", sorted(NOT_UTF8))
def test_a_file_that_is_not_utf8_text_is_refused_naming_the_file(tmp_path: Path, encoding: str) -> None:
    path = tmp_path / "spec.yaml"
    path.write_bytes(NOT_UTF8[encoding])
    assert "is not UTF-8 text" in refusal(path)


def test_an_alias_bomb_is_refused_fast_without_expanding_it(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb())
    started = time.process_time()
    message = refusal(path)
    # Expanded, the document holds 9**11 strings; a bounded check touches each distinct node once.
    assert time.process_time() - started < 5
    assert f"more than {MAX_EXPANDED_NODES}" in message
    assert "lol" not in message


def test_a_document_that_contains_itself_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "loop.yaml"
    path.write_text("a: &a [*a]\n")
    assert "refers to itself" in refusal(path)


def test_nesting_deeper_than_the_parser_can_follow_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("a: " + "[" * 5000 + "]" * 5000 + "\n")
    assert "nests too deeply" in refusal(path)


def test_anchors_and_aliases_within_the_bound_still_load(tmp_path: Path) -> None:
    path = tmp_path / "ok.yaml"
    path.write_text(alias_bomb(levels=3, width=3))
    assert read_yaml(path, "<file>", SpecError)["a2"] == [[["lol"]] * 3] * 3


def test_a_control_character_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "nul.yaml"
    path.write_text("name: llm\x00demo\n")
    assert "is not valid YAML" in refusal(path)
