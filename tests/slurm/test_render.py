"""Assembling sbatch scripts: quoting, names, directives."""

from __future__ import annotations

import subprocess

import pytest

from launch.scripts import JOBS_DIR
from slurm.render import SettingValue, assemble, sbatch_directives, settings_block, shell_value, static_part


@pytest.mark.parametrize(
    ("value", "expected"),
    [("plain", "plain"), ("it's $HOME", "'it'\"'\"'s $HOME'"), (3, "3"), (True, "1"), (["a b", "c"], "('a b' c)")],
)
def test_values_are_shell_quoted(value: SettingValue, expected: str) -> None:
    assert shell_value(value) == expected


def test_settings_survive_a_round_trip_through_bash() -> None:
    block = settings_block({"ODD": "a'b\"c $x `y`", "LIST": ["one two", "three"]}, {"NCCL_DEBUG": "INFO"})
    script = block + 'printf "%s|" "$ODD" "${LIST[@]}" "$NCCL_DEBUG"'
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout == "a'b\"c $x `y`|one two|three|INFO|"


@pytest.mark.parametrize("name", ["lower", "1ST", "WITH-DASH"])
def test_setting_names_must_be_upper_case_shell_names(name: str) -> None:
    with pytest.raises(ValueError, match="upper-case shell variable"):
        settings_block({name: "x"}, {})


def test_directives_cannot_span_lines() -> None:
    assert (
        sbatch_directives([("requeue", None), ("time", "01:00:00")]) == "#SBATCH --requeue\n#SBATCH --time=01:00:00\n"
    )
    with pytest.raises(ValueError, match="cannot span lines"):
        sbatch_directives([("job-name", "a\nb")])


def test_parts_lose_their_own_header_and_the_script_keeps_sbatch_lines_first() -> None:
    assert not static_part(JOBS_DIR, "fsdp.sh").startswith("#!")
    text = assemble([("nodes", "2")], "cmd", {"RUN_DIR": "/r"}, {}, JOBS_DIR, ["common.sh"])
    lines = text.splitlines()
    assert lines[0] == "#!/bin/bash"
    first_command = next(i for i, line in enumerate(lines) if line and not line.startswith("#"))
    assert lines.index("#SBATCH --nodes=2") < first_command  # SLURM stops reading #SBATCH at the first command
