"""`make rehearse`: README's deploy and tear-down against moto's server; prints how far it got and writes the doc.

    python -m tests.rehearsal [--workdir build/rehearsal] [--doc docs/rehearsal.md | --no-doc]

The work directory (wiped first) keeps the scratch repository, every command's output (calls/), the AWS profiles
and the emulator's log (moto.log). Exit status 1 when a README command did not run as written or a stack the
rehearsal must bring up did not; the doc is written either way.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from tests.rehearsal.run import REPO, ran_as_written, rehearse
from tests.rehearsal.table import DOC, render


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.rehearsal", description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", type=Path, default=REPO / "build" / "rehearsal")
    parser.add_argument("--doc", type=Path, default=REPO / DOC, help="where the generated table goes")
    parser.add_argument("--no-doc", action="store_true", help="print the table only")
    args = parser.parse_args(argv)
    shutil.rmtree(args.workdir, ignore_errors=True)
    args.workdir.mkdir(parents=True)
    started = time.monotonic()
    result = rehearse(args.workdir, echo=lambda line: print(line, file=sys.stderr, flush=True))
    text = render(result)
    print(text)
    if not args.no_doc:
        args.doc.write_text(text)
        print(f"rehearsal: wrote {args.doc}", file=sys.stderr)
    print(f"rehearsal: {time.monotonic() - started:.0f} s; commands' output under {args.workdir}", file=sys.stderr)
    return 0 if ran_as_written(result.calls, result.expected_argv) else 1


if __name__ == "__main__":
    sys.exit(main())
