"""tests/scheduling.py's order, and a real two-worker xdist run with the repo's hook, once_per_run and Durations."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.scheduling import FIRST, JOURNEYS, file_rank, ordered

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Mark:
    name: str


@dataclass
class FakeItem:
    nodeid: str
    marks: list[str] = field(default_factory=list)

    def iter_markers(self) -> list[Mark]:
        return [Mark(name) for name in self.marks]


def test_journeys_then_slow_files_then_the_rest_each_file_whole_and_in_its_order() -> None:
    items = [
        FakeItem("tests/a.py::one"),
        FakeItem("tests/launch/test_fsdp_slurm.py::x", ["slurm"]),
        FakeItem("tests/test_rehearsal.py::first"),
        FakeItem("tests/a.py::two"),
        FakeItem("tests/test_head_node_rehearsal.py::only"),
        FakeItem("tests/test_rehearsal.py::second", ["emulator"]),
        FakeItem("tests/launch/test_fsdp_slurm.py::y"),  # unmarked, but its file is slow
    ]
    assert [item.nodeid for item in ordered(items)] == [
        "tests/test_head_node_rehearsal.py::only",
        "tests/test_rehearsal.py::first",
        "tests/test_rehearsal.py::second",
        "tests/launch/test_fsdp_slurm.py::x",
        "tests/launch/test_fsdp_slurm.py::y",
        "tests/a.py::one",
        "tests/a.py::two",
    ]


def test_the_journeys_and_long_files_are_the_suites_files_and_rank_before_any_other() -> None:
    assert FIRST[: len(JOURNEYS)] == JOURNEYS and all((REPO / path).is_file() for path in FIRST)
    assert max(file_rank(path, []) for path in FIRST) < file_rank("tests/x.py", ["slurm"]) < file_rank("y", [])


# A suite of its own under tmp: two journeys (by the repo's names) and plain files. Every test records its worker;
# every module fixture and the once_per_run product record each time they are made.
CONFTEST = """
import os
from pathlib import Path

import pytest

from tests.conftest import pytest_collection_modifyitems  # noqa: F401  (the repo's hook, as make test runs it)
from tests.durations import Durations
from tests.once_per_run import once_per_run

LOG = Path(os.environ["SUITE_LOG"])


def record(**fields):
    import json
    with LOG.open("a") as log:
        log.write(json.dumps({"worker": os.environ.get("PYTEST_XDIST_WORKER", "main"), **fields}) + "\\n")


def pytest_configure(config):
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(Durations(Path(os.environ["SUITE_DURATIONS"])), "durations")


@pytest.fixture(scope="session")
def singleton(tmp_path_factory):
    def make(folder):
        record(made="singleton", folder=str(folder))
        (folder / "product").write_text("once")
    return once_per_run(tmp_path_factory, "singleton", make)


@pytest.fixture(scope="module")
def journey(request):
    record(made="module", file=request.node.nodeid)
"""

JOURNEY = """
def test_one(journey, singleton):
    from conftest import record
    record(test="{name}::one", folder=str(singleton))


def test_two(journey, singleton):
    from conftest import record
    record(test="{name}::two", folder=str(singleton))
"""

PLAIN = """
import pytest


@pytest.mark.parametrize("n", range(6))
def test_plain(journey, n):
    from conftest import record
    record(test="{name}")
"""


def test_two_workers_take_a_journey_each_first_run_each_file_whole_and_make_the_singleton_once(
    tmp_path: Path,
) -> None:
    suite = tmp_path / "suite"
    (suite / "tests").mkdir(parents=True)
    (suite / "conftest.py").write_text(CONFTEST)
    names = [*JOURNEYS, *(f"tests/test_plain_{n}.py" for n in range(4))]
    for name in names:
        (suite / name).write_text((JOURNEY if name in JOURNEYS else PLAIN).replace("{name}", name))
    log, durations = tmp_path / "log.jsonl", tmp_path / "durations.json"
    env = {**os.environ, "PYTHONPATH": str(REPO), "SUITE_LOG": str(log), "SUITE_DURATIONS": str(durations)}
    # Plain files listed first: only the hook puts the journeys ahead, and xdist's own reorder (by test count) is off.
    paths = [*names[2:], *names[:2]]
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadfile"]
    result = subprocess.run(
        [*command, "--no-loadscope-reorder", "--rootdir", str(suite), *paths],
        cwd=suite,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    tests = [row for row in rows if "test" in row]
    assert len(tests) == 2 * 2 + 4 * 6
    workers_of = {name: {row["worker"] for row in tests if row["test"].startswith(name)} for name in names}
    assert all(len(workers) == 1 for workers in workers_of.values()), workers_of
    assert workers_of[JOURNEYS[0]] != workers_of[JOURNEYS[1]]  # one journey each, at the start
    for journey in JOURNEYS:
        (worker,) = workers_of[journey]
        assert next(row["test"] for row in tests if row["worker"] == worker).startswith(journey)
    modules = [row["file"] for row in rows if row.get("made") == "module"]
    assert sorted(modules) == sorted(names)  # each module fixture once
    made = [row for row in rows if row.get("made") == "singleton"]
    used = {row["folder"] for row in tests if "folder" in row}
    assert len(made) == 1 and used == {made[0]["folder"]}  # both workers used it; one made it
    report = json.loads(durations.read_text())
    assert sorted(report["workers_s"]) == ["gw0", "gw1"]
    assert sorted(row["file"] for row in report["files"]) == sorted(names)
    assert "slowest test files" in result.stdout


def test_the_suite_under_two_workers_collects_what_it_collects_alone() -> None:
    """loadfile needs every worker to collect the same items: a plain count against a two-worker count."""
    args = ["-q", "-p", "no:cacheprovider", "--collect-only", "tests/test_layers.py", "tests/slurm"]
    alone = subprocess.run([sys.executable, "-m", "pytest", *args], cwd=REPO, capture_output=True, text=True)
    count = next(line for line in alone.stdout.splitlines() if " collected" in line or "tests collected" in line)
    parallel = subprocess.run(
        [sys.executable, "-m", "pytest", *args, "-n", "2", "--dist", "loadfile", "--no-loadscope-reorder"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert parallel.returncode == 0, parallel.stdout + parallel.stderr
    assert count.split()[0] in parallel.stdout, (count, parallel.stdout[-2000:])
