"""The order `make test` hands test files to pytest-xdist's workers (--dist loadfile --no-loadscope-reorder).

A file is one unit of work (its module fixtures, such as a rehearsal, run once, on one worker); the workers take
files in collection order, so the longest go first and the short ones fill the gaps at the end: the two journeys
and the runbook test, then every file with a test that starts daemons, ranks, synths or emulators, then the rest, each in the order
pytest found them. tests/durations.py measures what each file took, to check this order against.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, TypeVar

# The slow journeys, longest first: each one file, so each runs whole on one worker (docs/testing.md).
JOURNEYS: tuple[str, ...] = ("tests/test_head_node_rehearsal.py", "tests/test_rehearsal.py")
# Then the other files of several minutes, sent out before the files that only have a slow mark.
LONG_FILES: tuple[str, ...] = ("tests/test_runbook.py",)
FIRST: tuple[str, ...] = (*JOURNEYS, *LONG_FILES)
# Marks of tests that wait on something slow (pyproject.toml's markers).
SLOW_MARKS = frozenset({"slurm", "distributed", "scrape", "emulator", "bootstrap", "runbook", "synth", "pcluster"})


class Item(Protocol):
    """What ordering needs of a pytest item."""

    @property
    def nodeid(self) -> str: ...

    def iter_markers(self) -> Iterable[object]: ...


AnyItem = TypeVar("AnyItem", bound=Item)


def file_of(nodeid: str) -> str:
    """The file a test id lives in: loadfile's unit of work."""
    return nodeid.split("::", 1)[0]


def file_rank(path: str, marks: Iterable[str]) -> tuple[int, int]:
    """Lower goes first: the journeys and long files by their place in FIRST, then files with a slow mark, then
    the rest."""
    if path in FIRST:
        return (0, FIRST.index(path))
    return (1, 0) if SLOW_MARKS.intersection(marks) else (2, 0)


def _mark_names(item: Item) -> set[str]:
    return {str(getattr(mark, "name", "")) for mark in item.iter_markers()}


def ordered(items: Sequence[AnyItem]) -> list[AnyItem]:
    """The items, each file's kept together and in its own order, files sorted by `file_rank` (stable)."""
    marks: dict[str, set[str]] = {}
    first_seen: dict[str, int] = {}
    for index, item in enumerate(items):
        path = file_of(item.nodeid)
        first_seen.setdefault(path, index)
        marks.setdefault(path, set()).update(_mark_names(item))

    def key(indexed: tuple[int, AnyItem]) -> tuple[tuple[int, int], int, int]:
        index, item = indexed
        path = file_of(item.nodeid)
        return (file_rank(path, marks[path]), first_seen[path], index)

    return [item for _, item in sorted(enumerate(items), key=key)]
