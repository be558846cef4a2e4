"""What every refusal of bad input must look like (README: one line per problem naming the field and the value),
shared by the property-based tests of the spec (tests/test_bad_input.py) and of the CLIs.

A refusal is: a non-zero exit, at most MAX_LINES lines on stdout and stderr together, no traceback, a message
that names the field, option or file, and every sentinel file planted in an output location still there, byte for
byte. `run_main` calls a command's real `main` in this process (fast enough for many examples); `run_command` runs
it as a user does, in a fresh interpreter.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

MAX_LINES = 3
SENTINEL_NAME = "sentinel.keep"


@dataclass(frozen=True)
class Outcome:
    """What a command left: its exit status and its output."""

    status: int
    stdout: str
    stderr: str

    @property
    def lines(self) -> list[str]:
        return [line for line in (self.stdout + "\n" + self.stderr).splitlines() if line.strip()]


def run_main(main: Callable[[Sequence[str]], int | None], argv: Sequence[str]) -> Outcome:
    """Call `main(argv)` as its console script would; an exception that escapes becomes a printed traceback, the
    way the interpreter would show it (status 1)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            result = main(list(argv))
            status = int(result or 0)
        except SystemExit as exit_:
            code = exit_.code
            status = code if isinstance(code, int) else (0 if code is None else 1)
            if isinstance(code, str):
                print(code, file=sys.stderr)
        except BaseException:  # what a user would see: the traceback
            traceback.print_exc(file=sys.stderr)
            status = 1
    return Outcome(status, out.getvalue(), err.getvalue())


def run_command(argv: Sequence[str], cwd: Path | None = None, timeout: float = 120) -> Outcome:
    """Run `argv` (e.g. [sys.executable, "-m", "spec.phase_two", ...]) in a fresh process."""
    done = subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    return Outcome(done.returncode, done.stdout, done.stderr)


def refusal_problems(outcome: Outcome, names: str | Iterable[str]) -> list[str]:
    """Why `outcome` is not a clear refusal naming one of `names` (empty: it is one)."""
    wanted = [names] if isinstance(names, str) else list(names)
    text = "\n".join(outcome.lines)
    problems = []
    if outcome.status == 0:
        problems.append("exit status 0")
    if "Traceback (most recent call last)" in outcome.stdout + outcome.stderr:
        problems.append("a traceback")
    if len(outcome.lines) > MAX_LINES:
        problems.append(f"{len(outcome.lines)} lines (at most {MAX_LINES})")
    if not any(name in text for name in wanted):
        problems.append(f"no mention of {' or '.join(map(repr, wanted))}")
    return problems


def assert_clear_refusal(outcome: Outcome, names: str | Iterable[str]) -> None:
    """Non-zero exit, at most MAX_LINES lines, no traceback, and one of `names` (a field, option or file) named."""
    problems = refusal_problems(outcome, names)
    shown = "\n".join(outcome.lines[:20])
    assert not problems, f"not a clear refusal ({'; '.join(problems)}); status {outcome.status}, output:\n{shown}"


def plant_sentinels(locations: Iterable[Path]) -> dict[Path, bytes]:
    """A file in each output location (a directory gets SENTINEL_NAME inside it; a file is kept as it is):
    what each held before the command ran."""
    kept: dict[Path, bytes] = {}
    for location in locations:
        if location.is_file():
            kept[location] = location.read_bytes()
            continue
        location.mkdir(parents=True, exist_ok=True)
        sentinel = location / SENTINEL_NAME
        sentinel.write_bytes(b"kept: " + str(location).encode())
        kept[sentinel] = sentinel.read_bytes()
    return kept


def assert_sentinels_survive(kept: dict[Path, bytes]) -> None:
    """Every planted (or pre-existing) file is still there with the same bytes."""
    lost = [str(path) for path, content in kept.items() if not path.is_file() or path.read_bytes() != content]
    assert not lost, f"files lost or changed by a refused command: {', '.join(lost)}"
