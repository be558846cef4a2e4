"""The FSDP job's rendezvous store, served by the batch script on the first node for the whole step.

torchrun's c10d rendezvous otherwise makes the first node's agent host the store: when that agent passes the exit
barrier it exits and closes the store while the other agents are still reading the barrier's last key, and each of
them logs a c10d TCPStore C++ stack trace at the end of a successful job. With the store outside the agents
(`--rdzv_conf is_host=false` on every node) it outlives them all; the batch script stops it after the step.

    python -m launch.rendezvous_store --host ADDR --port PORT --ready-file FILE
"""

from __future__ import annotations

import signal
import sys
from datetime import timedelta
from pathlib import Path

from torch.distributed import TCPStore

from spec.cli import OneLineParser, user_errors


@user_errors
def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m launch.rendezvous_store", description=__doc__)
    parser.add_argument("--host", required=True, help="the address the agents connect to (the first node's)")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ready-file", type=Path, required=True, help="created once the store accepts connections")
    args = parser.parse_args(argv)
    stop = {"signal": 0}

    def on_signal(number: int, _frame: object) -> None:
        stop["signal"] = number

    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, on_signal)
    # The server listens on every interface; the master's own client connection proves it is up.
    store = TCPStore(args.host, args.port, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=60))
    args.ready_file.touch()
    while not stop["signal"]:
        signal.pause()
    del store
    return 0


if __name__ == "__main__":
    sys.exit(main())
