"""Stand-in for the NeMo container step on a GPU node, for the local cluster (no GPUs, no NeMo): what the entry
point does around the framework's stop on SIGUSR1 (bridge_pretrain.py: Megatron Bridge's exit signal handler;
nemo_pretrain.py: NeMo's PreemptionCallback). The first attempt trains until SIGUSR1 arrives, then reports a
checkpointed stop (EXIT_REQUEUE); a requeued attempt finishes. Config through that entry point's own reader, status
through the writer both share (launch/jobs/job_contract.py).

    python preemptible_step.py --config RUN_DIR/bridge-config.yaml   (or RUN_DIR/nemo-config.yaml)
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from launch.jobs import bridge_pretrain, nemo_pretrain
from launch.jobs.job_contract import EXIT_OK, EXIT_REQUEUE, write_exit_status


def main() -> int:
    path = sys.argv[sys.argv.index("--config") + 1]
    entry = bridge_pretrain if Path(path).name == "bridge-config.yaml" else nemo_pretrain
    config = entry.load_config(path)
    status = config["exit_status_file"]
    if int(os.environ.get("SLURM_RESTART_COUNT", "0")) > 0:
        write_exit_status(status, EXIT_OK, "finished")
        return EXIT_OK
    stopped: list[int] = []
    signal.signal(signal.SIGUSR1, lambda signum, frame: stopped.append(signum))
    ready = Path(status).parent / f"step-ready.{os.environ['SLURM_PROCID']}"
    ready.touch()
    while not stopped:
        time.sleep(0.05)
    write_exit_status(status, EXIT_REQUEUE, "stopped on SIGUSR1 after a checkpoint")
    return EXIT_REQUEUE


if __name__ == "__main__":
    raise SystemExit(main())
