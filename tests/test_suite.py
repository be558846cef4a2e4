"""`make test`'s second phase (tests/suite.py) and the environments its tests wait for (tests/environments.py)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.environments import ENVIRONMENTS, UnknownEnvironment, folder
from tests.suite import parse_args, run

REPO = Path(__file__).resolve().parents[1]


def scratch(tmp_path: Path, makefile: str, test: str) -> Path:
    (tmp_path / "Makefile").write_text(makefile)
    (tmp_path / "test_scratch.py").write_text(test)
    return tmp_path


def suite(root: Path, *targets: str) -> int:
    return run(parse_args(["--jobs", "2", "--log", str(root / "setup.log"), *targets, "--", "-q", "-p",
                           "no:cacheprovider", "test_scratch.py"]), root)  # fmt: skip


def test_a_failed_background_build_fails_the_run_though_every_test_passed(tmp_path: Path) -> None:
    root = scratch(tmp_path, "ok:\n\ttrue\nbroken:\n\techo 'lint: 1 error' && exit 3\n", "def test_x():\n    pass\n")
    assert suite(root, "ok", "broken") != 0
    assert "lint: 1 error" in (root / "setup.log").read_text()
    phases = json.loads((root / "build" / "test-phases.json").read_text())
    assert phases["pytest_exit"] == 0 and phases["background_make_exit"] != 0


def test_a_failed_test_fails_the_run_with_pytests_status(tmp_path: Path) -> None:
    root = scratch(tmp_path, "ok:\n\ttrue\n", "def test_x():\n    assert False\n")
    assert suite(root, "ok") == 1


def test_a_run_that_collects_nothing_fails(tmp_path: Path) -> None:
    root = scratch(tmp_path, "ok:\n\ttrue\n", "x = 1\n")
    assert suite(root, "ok") == 5


def test_tests_start_while_the_background_build_runs(tmp_path: Path) -> None:
    """The build waits for a file the test writes; had pytest waited for make, the build would give up (a ceiling of
    a minute, never reached when it works) and fail the run."""
    makefile = "slow:\n\tfor i in $$(seq 600); do [ -e started ] && exit 0; sleep 0.1; done; exit 7\n"
    test = "from pathlib import Path\n\ndef test_x():\n    Path('started').touch()\n"
    root = scratch(tmp_path, makefile, test)
    assert suite(root, "slow") == 0


def test_every_environment_the_makefile_builds_for_tests_can_be_waited_for() -> None:
    """A rule's folder without an entry here would be read by a test before `make test` built it."""
    dry = subprocess.run(
        ["make", "--no-print-directory", "-n", "-B", "test-setup"], cwd=REPO, capture_output=True, text=True
    )
    markers = re.findall(r"^python3 -m tests\.env_cache (\S+)", dry.stdout, re.MULTILINE)
    built = {str(Path(marker).parent) for marker in markers}
    # .venv and node_modules are built before pytest starts; the rest beside it.
    assert built - {".venv", "node_modules"} == {path for path, _ in ENVIRONMENTS.values()}


def test_make_test_builds_every_environment_beside_the_suite() -> None:
    dry = subprocess.run(["make", "--no-print-directory", "-n", "test"], cwd=REPO, capture_output=True, text=True)
    assert dry.returncode == 0, dry.stderr
    (line,) = [line for line in dry.stdout.splitlines() if "-m tests.suite" in line]
    beside = line.split(" -- ")[0].split()
    assert set(ENVIRONMENTS) | {"lint"} <= set(beside)


def test_no_test_reads_an_environments_marker_itself() -> None:
    """A test checking `.installed` on its own would fail (or skip) while `make test` is still building."""
    offenders = []
    for path in REPO.joinpath("tests").rglob("*.py"):
        if path.name in ("environments.py", "env_cache.py", "test_env_cache.py", "test_suite.py"):
            continue
        text = path.read_text()
        for env_folder, marker in ENVIRONMENTS.values():
            name = Path(env_folder).name
            if re.search(rf"{re.escape(name)}.{{0,80}}{re.escape(marker)}", text, re.S):
                offenders.append(f"{path.relative_to(REPO)}: {name}/{marker}")
    assert offenders == [], "use tests.environments.ready(target)"


def test_an_unknown_environment_is_named() -> None:
    with pytest.raises(UnknownEnvironment, match=r"target: 'nemo' is not a test environment"):
        folder("nemo")
