"""`make test`'s second phase: pytest, with the test-only environments and lint built beside it.

    python -m tests.suite --jobs 3 --log build/test-setup.log TARGET... -- PYTEST_ARGS...

The targets (lint and the environments of tests/environments.py) run in one background `make -jJOBS`, whose output
goes to the log; pytest starts at once, and a test that needs an environment not built yet waits for it
(tests/environments.ready). The exit status is pytest's when it failed, else make's: a failed build or lint fails
`make test` even when every test that waited on it was skipped or passed. build/test-phases.json records when each
phase ended.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PHASES = REPO / "build" / "test-phases.json"
LOG_TAIL_LINES = 60


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    argv = list(argv)
    ours, pytest_args = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(prog="python -m tests.suite", description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=3, help="make -j for the background targets")
    parser.add_argument(
        "--log", type=Path, default=REPO / "build" / "test-setup.log", help="the background make's output"
    )
    parser.add_argument("targets", nargs="*", help="make targets built beside pytest")
    args = parser.parse_args(ours)
    if args.jobs < 1:
        parser.error(f"--jobs: {args.jobs} must be at least 1")
    args.pytest_args = pytest_args
    return args


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""


def run(args: argparse.Namespace, root: Path = REPO) -> int:
    """`root`: where make and pytest run (the repo; a scratch copy in tests/test_suite.py)."""
    began = time.monotonic()
    args.log.parent.mkdir(parents=True, exist_ok=True)
    phases: dict[str, float | int | None] = {}
    builder = None
    with args.log.open("w") as log:
        if args.targets:
            command = ["make", "--no-print-directory", f"-j{args.jobs}", "--output-sync=target", *args.targets]
            print(f"suite: building beside pytest ({' '.join(args.targets)}); output in {args.log}", flush=True)
            builder = subprocess.Popen(command, cwd=root, stdout=log, stderr=subprocess.STDOUT)
        tests = subprocess.run([sys.executable, "-m", "pytest", *args.pytest_args], cwd=root, check=False)
        phases["pytest_s"] = round(time.monotonic() - began, 1)
        phases["pytest_exit"] = tests.returncode
        built = builder.wait() if builder is not None else 0
        phases["background_make_exit"] = built
    phases["all_s"] = round(time.monotonic() - began, 1)
    phases_file = root / PHASES.relative_to(REPO)
    phases_file.parent.mkdir(parents=True, exist_ok=True)
    phases_file.write_text(json.dumps(phases, indent=2) + "\n")
    if built != 0:
        print(f"suite: the background make failed (exit {built}); the end of {args.log}:\n{tail(args.log)}", flush=True)
    if tests.returncode != 0:
        return tests.returncode
    return built


def main(argv: Sequence[str] | None = None) -> int:
    return run(parse_args(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
