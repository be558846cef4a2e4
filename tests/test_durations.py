"""tests/durations.py: seconds by file, folder and worker from a real pytest run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.durations import group_of

REPO = Path(__file__).resolve().parents[1]

CONFTEST = """
import os
from pathlib import Path

from tests.durations import Durations


def pytest_configure(config):
    config.pluginmanager.register(Durations(Path(os.environ["SUITE_DURATIONS"])), "durations")
"""


def test_files_group_by_their_folder_under_tests() -> None:
    assert group_of("tests/launch/test_submit.py") == "tests/launch"
    assert group_of("tests/training/data/test_loader.py") == "tests/training"
    assert group_of("tests/test_layers.py") == "tests"


def test_a_run_reports_each_files_time_including_its_fixtures(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    (suite / "tests" / "slow").mkdir(parents=True)
    (suite / "conftest.py").write_text(CONFTEST)
    # The fixture's setup counts: the file's seconds are at least what its fixture slept.
    (suite / "tests" / "slow" / "test_waits.py").write_text(
        "import time\nimport pytest\n\n\n@pytest.fixture\ndef wait():\n    time.sleep(0.3)\n\n\n"
        "def test_a(wait):\n    pass\n\n\ndef test_b():\n    pass\n"
    )
    (suite / "tests" / "test_quick.py").write_text("def test_c():\n    pass\n")
    report = tmp_path / "durations.json"
    env = {**os.environ, "PYTHONPATH": str(REPO), "SUITE_DURATIONS": str(report)}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(suite), "tests"],
        cwd=suite,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads(report.read_text())
    files = {row["file"]: row for row in summary["files"]}
    assert files["tests/slow/test_waits.py"]["tests"] == 2 and files["tests/slow/test_waits.py"]["seconds"] >= 0.3
    assert files["tests/test_quick.py"]["tests"] == 1
    assert summary["files"][0]["file"] == "tests/slow/test_waits.py"  # slowest first
    assert next(iter(summary["groups_s"])) == "tests/slow" and list(summary["workers_s"]) == ["main"]
    assert "tests/slow/test_waits.py" in result.stdout  # printed in the summary
