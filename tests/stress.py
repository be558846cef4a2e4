"""`make test-stress`: the tests that wait on jobs, daemons, ranks and scrapes, run ROUNDS times while busy loops
of our own keep every core saturated, as CI's machine often is. A test that passes only on an idle machine fails
here; each failure is printed with the message the test gave (the job tests end theirs with the job's story).

    python -m tests.stress [--rounds 3] [--hogs N] [-- PYTEST ARGS...]

Not part of `make test` (it takes several times the selected tests' time); run it before stopping.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Everything that launches processes and waits on them: SLURM jobs and daemons, torchrun ranks, Prometheus scrapes.
SELECTION = ["-m", "slurm or distributed or scrape"]
# A busy loop that ends by itself: a hog outlives nothing even if this runner is killed.
HOG = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"


@dataclass
class Round:
    number: int
    seconds: float
    exit_code: int
    passed: int = 0
    skipped: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)  # (test id, what it said)

    @property
    def ran(self) -> int:
        return self.passed + len(self.failures)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.failures and self.ran > 0

    def line(self) -> str:
        return (
            f"round {self.number}: {self.passed} passed, {len(self.failures)} failed, {self.skipped} skipped "
            f"in {self.seconds:.0f} s (pytest exit {self.exit_code})"
        )


def read_junit(path: Path, number: int, seconds: float, exit_code: int) -> Round:
    """One round's counts and failures from pytest's JUnit XML."""
    result = Round(number, seconds, exit_code)
    if not path.exists():
        result.failures.append(("(pytest)", f"no report at {path}: pytest ended with {exit_code} before writing it"))
        return result
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        test_id = f"{case.get('classname', '')}::{case.get('name', '')}"
        problems = [child for child in case if child.tag in ("failure", "error")]
        if problems:
            text = "\n".join(f"{p.get('message', '')}\n{p.text or ''}" for p in problems)
            result.failures.append((test_id, text))
        elif any(child.tag == "skipped" for child in case):
            result.skipped += 1
        else:
            result.passed += 1
    return result


def start_hogs(count: int, seconds: float) -> list[subprocess.Popen[bytes]]:
    program = HOG.format(seconds=seconds)
    return [subprocess.Popen([sys.executable, "-c", program], start_new_session=True) for _ in range(count)]


def stop_hogs(hogs: list[subprocess.Popen[bytes]]) -> None:
    for hog in hogs:
        if hog.poll() is None:
            os.killpg(hog.pid, signal.SIGKILL)
        hog.wait()


def run_round(number: int, pytest_args: list[str], report_dir: Path) -> Round:
    junit = report_dir / f"round-{number}.xml"
    junit.unlink(missing_ok=True)
    command = [sys.executable, "-m", "pytest", *SELECTION, f"--junitxml={junit}", "-p", "no:cacheprovider"]
    started = time.monotonic()
    exit_code = subprocess.run([*command, *pytest_args], cwd=REPO, check=False).returncode
    return read_junit(junit, number, time.monotonic() - started, exit_code)


def report(rounds: list[Round], hogs: int) -> str:
    lines = []
    for result in rounds:
        for test_id, text in result.failures:
            tail = "\n".join(text.strip().splitlines()[-80:])
            lines += [f"==== round {result.number}: FAILED {test_id}", tail, ""]
    lines += [result.line() for result in rounds]
    held = sum(result.ok for result in rounds)
    counts = sorted({result.ran for result in rounds})
    lines.append(
        f"stress: {held} of {len(rounds)} rounds passed, {'/'.join(map(str, counts))} tests run per round, "
        f"under {hogs} busy loops on {os.cpu_count()} cores"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.stress", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--hogs", type=int, default=os.cpu_count() or 2, help="busy loops (default: one per core)")
    parser.add_argument("--max-hog-s", type=float, default=4 * 3600, help="a busy loop ends by itself after this")
    parser.add_argument("--report-dir", type=Path, default=REPO / "build" / "stress")
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER, help="-- extra pytest arguments")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds: {args.rounds} must be >= 1")
    if args.hogs < 0:
        parser.error(f"--hogs: {args.hogs} must be >= 0")
    extra = args.pytest_args[1:] if args.pytest_args[:1] == ["--"] else args.pytest_args
    args.report_dir.mkdir(parents=True, exist_ok=True)
    hogs = start_hogs(args.hogs, args.max_hog_s)
    rounds: list[Round] = []
    try:
        for number in range(1, args.rounds + 1):
            rounds.append(run_round(number, extra, args.report_dir))
            print(rounds[-1].line(), flush=True)
    finally:
        stop_hogs(hogs)
    print(report(rounds, args.hogs), flush=True)
    return 0 if all(result.ok for result in rounds) else 1


if __name__ == "__main__":
    sys.exit(main())
