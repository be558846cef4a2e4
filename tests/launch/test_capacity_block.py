"""--ends-at: a Capacity Block's end as the job's time limit (launch/capacity_block.py, llm-submit, the script)."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from launch.capacity_block import TERMINATION_LEAD_S, block_time_limit, parse_ends_at, slurm_time
from launch.submit import main as submit_main
from slurm.errors import SubmitError


def test_the_instances_end_thirty_minutes_before_the_block() -> None:
    assert parse_ends_at("2026-12-01T11:30:00Z") == int(datetime(2026, 12, 1, 11, 0, tzinfo=UTC).timestamp())
    assert parse_ends_at("2026-12-01T12:30:00+01:00") == parse_ends_at("2026-12-01T11:30:00Z")
    assert TERMINATION_LEAD_S == 1800


@pytest.mark.parametrize(
    ("text", "problem"),
    [("tomorrow", "is not an ISO 8601 time"), ("2026-12-01T11:30:00", "has no time zone")],
)
def test_a_bad_end_time_is_one_line_naming_the_option(text: str, problem: str) -> None:
    with pytest.raises(SubmitError, match=f"^--ends-at: '{text}' {problem}"):
        parse_ends_at(text)


def test_the_time_limit_is_what_is_left_of_the_block_or_the_shorter_given_one() -> None:
    now = 1_000_000.0
    assert block_time_limit(int(now) + 3 * 3600 + 59, None, 300, now) == "03:00:00"
    assert block_time_limit(int(now) + 2 * 86400 + 90, None, 300, now) == "2-00:01:00"
    assert block_time_limit(int(now) + 3 * 3600, "01:00:00", 300, now) == "01:00:00"
    assert block_time_limit(int(now) + 3 * 3600, "05:00:00", 300, now) == "03:00:00"
    with pytest.raises(SubmitError, match=r"^--ends-at: the block's instances terminate in 360 s .* 300 s signal lead"):
        block_time_limit(int(now) + 360, None, 300, now)
    assert slurm_time(59) == "00:00:00"


def test_llm_submit_renders_the_blocks_time_limit_and_the_script_trims_it_at_start(
    tiny_config: Path, demo_data: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ends = datetime.fromtimestamp(time.time() + TERMINATION_LEAD_S + 2 * 3600 + 120, UTC)
    argv = ["--backend", "fsdp", "--model", str(tiny_config), "--nodes", "2", "--data-prefix", demo_data,
            "--run-dir", str(tmp_path / "run"), "--local", "--ends-at", ends.isoformat(), "--dry-run"]  # fmt: skip
    assert submit_main(argv) == 0
    script = capsys.readouterr().out
    assert re.search(r"^#SBATCH --time=02:0[12]:00$", script, re.M), script[:800]
    assert f"\nENDS_BY={int(ends.timestamp()) - TERMINATION_LEAD_S}\n" in script
    assert re.search(r"^TIME_LIMIT_S=72[06]0$", script, re.M)
    assert "\ntrim_time_limit() {" in script and "\n\ttrim_time_limit\n" in script


def test_a_block_too_close_to_its_end_is_refused(
    tiny_config: Path, demo_data: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ends = datetime.fromtimestamp(time.time() + TERMINATION_LEAD_S + 60, UTC)
    argv = ["--backend", "fsdp", "--model", str(tiny_config), "--nodes", "2", "--data-prefix", demo_data,
            "--run-dir", str(tmp_path / "run"), "--local", "--ends-at", ends.isoformat(), "--dry-run"]  # fmt: skip
    assert submit_main(argv) == 2
    assert capsys.readouterr().err.startswith("error: --ends-at: the block's instances terminate in ")
