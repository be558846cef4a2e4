"""docs/spec.md is generated from the model and must match it."""

from __future__ import annotations

from pathlib import Path

from spec.reference import render

DOC = Path(__file__).resolve().parents[2] / "docs" / "spec.md"


def test_committed_reference_matches_the_model() -> None:
    assert DOC.read_text() == render(), "docs/spec.md is stale: run `python -m spec.reference > docs/spec.md`"


def test_reference_covers_every_section() -> None:
    text = render()
    for section in ("## `accounts`", "## `network`", "## `data.datasets`", "## `cluster.queues`", "## `notebook`"):
        assert section in text, section
