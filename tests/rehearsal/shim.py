"""What bash finds as `npx`, `aws`, `python` and `make` while it runs the README's blocks: each call is logged (argv,
exit status, output) and passed to the real program; a call made by another logged call (the `aws s3 sync` of
`make upload-artifacts`) is logged with the argv of the call it runs inside. `npx` runs in a pseudo-terminal, as in a user's shell, and each
`(y/n)` question of the CDK CLI (deploy approval, "Are you sure you want to delete") is answered `y`, as the README's
reader would; the questions are logged. With REHEARSAL_DRY set nothing runs: the call is logged, prints DRY_OUTPUT
(what a `$(aws ... --query ...)` of the block then holds) and succeeds.

Environment: REHEARSAL_CALLS (the JSON-lines log), REHEARSAL_REAL_<TOOL> (the real program), REHEARSAL_DRY,
REHEARSAL_INSIDE (set by this shim for what it runs: the argv of the call, as JSON).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

QUESTION = re.compile(r"\(y/n\)\s*\??\s*$")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
TAIL_LINES = 12
DRY_OUTPUT = "rehearsal-dry-run-output"
# The scratch repository's .venv and node_modules are links to the checkout's: a `make` there takes them as built
# (make -o), or a prerequisite that looks newer than their stamp (a fresh worktree's package.json) would reinstall
# them in place, and npm ci deletes node_modules first.
AS_BUILT = ("node_modules/.installed", ".venv/.installed")


def plain(data: bytes) -> str:
    return ANSI.sub("", data.decode("utf-8", errors="replace")).replace("\r\n", "\n").replace("\r", "\n")


def run_in_terminal(argv: list[str], log: Path) -> tuple[int, list[str]]:
    """Run argv with a pseudo-terminal as its stdin, stdout and stderr; answer every (y/n) question with y."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
    process = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)

    def stop(signum: int, frame: object) -> None:  # the rehearsal ends the block: end the CLI's session too
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    answered: list[str] = []
    pending = b""
    with log.open("wb") as out:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every holder of the terminal's other end is gone
                break
            if not chunk:
                break
            out.write(chunk)
            pending = (pending + chunk)[-2048:]
            last_line = plain(pending).rstrip(" ").split("\n")[-1]
            if QUESTION.search(last_line):
                answered.append(last_line.strip())
                os.write(master, b"y\n")
                pending = b""
    os.close(master)
    return process.wait(), answered


def run_piped(argv: list[str], log: Path) -> int:
    """Run argv with this process's stdin; its stdout and stderr are logged and passed on (for `$(aws ...)`)."""
    result = subprocess.run(argv, capture_output=True)
    log.write_bytes(result.stdout + result.stderr)
    sys.stdout.buffer.write(result.stdout)
    sys.stdout.flush()
    sys.stderr.buffer.write(result.stderr)
    sys.stderr.flush()
    return result.returncode


def main() -> None:
    tool = os.path.basename(sys.argv[0])
    argv = [tool, *sys.argv[1:]]
    calls = Path(os.environ["REHEARSAL_CALLS"])
    record: dict[str, object] = {"argv": argv}
    if "REHEARSAL_INSIDE" in os.environ:
        record["inside"] = json.loads(os.environ["REHEARSAL_INSIDE"])
    os.environ["REHEARSAL_INSIDE"] = json.dumps(argv)  # what the real program runs in turn
    if os.environ.get("REHEARSAL_DRY"):
        print(DRY_OUTPUT, flush=True)
        rc = 0
    else:
        number = sum(1 for _ in calls.open()) if calls.exists() else 0
        depth = "-inner" if "inside" in record else ""
        log = calls.parent / "calls" / f"{calls.stem}-{number:03d}-{tool}{depth}-{os.getpid()}.log"
        log.parent.mkdir(exist_ok=True)
        real = [os.environ[f"REHEARSAL_REAL_{tool.upper()}"], *argv[1:]]
        if tool == "make":
            real[1:1] = [word for stamp in AS_BUILT for word in ("-o", stamp)]
        print(f"rehearsal: $ {' '.join(argv)}", file=sys.stderr, flush=True)
        started = time.monotonic()
        answered: list[str] = []
        if tool == "npx":
            rc, answered = run_in_terminal(real, log)
        else:
            rc = run_piped(real, log)
        tail = plain(log.read_bytes()).strip().split("\n")[-TAIL_LINES:]
        record |= {"rc": rc, "log": str(log), "seconds": round(time.monotonic() - started, 1)}
        record |= {"answered": answered, "tail": tail}
        print(f"rehearsal:   exit {rc} after {record['seconds']} s ({log})", file=sys.stderr, flush=True)
    with calls.open("a") as out:
        out.write(json.dumps(record) + "\n")
    sys.exit(rc)


if __name__ == "__main__":
    main()
