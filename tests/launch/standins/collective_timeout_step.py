"""Stand-in for the NeMo container step when a rank hangs (no GPUs, no NCCL here): what torch.distributed does on a
collective's timeout with the flight recorder on. Every rank of the first node dumps its recent collectives where
nemo.sh points torch (TORCH_FR_DUMP_TEMP_FILE + global rank, a pickle in the format torch's own reader takes), then
aborts as the NCCL watchdog does (SIGABRT: exit 134); the last node's ranks are the silent ones, stopped in their
tracks, until Slurm ends the step. One task per node stands for STANDIN_RANKS_PER_NODE ranks. A requeued attempt
finishes.

    python collective_timeout_step.py --config RUN_DIR/bridge-config.yaml
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from launch.jobs import bridge_pretrain
from launch.jobs.job_contract import EXIT_OK, write_exit_status


def main() -> int:
    config = bridge_pretrain.load_config(sys.argv[sys.argv.index("--config") + 1])
    if int(os.environ.get("SLURM_RESTART_COUNT", "0")) > 0:
        write_exit_status(config["exit_status_file"], EXIT_OK, "finished")
        return EXIT_OK
    per_node, node = int(os.environ["STANDIN_RANKS_PER_NODE"]), int(os.environ["SLURM_NODEID"])
    if node == int(os.environ["SLURM_NNODES"]) - 1:
        while True:  # the silent ranks: Slurm kills the step once a peer has failed (--kill-on-bad-exit)
            time.sleep(1)
    prefix = os.environ["TORCH_FR_DUMP_TEMP_FILE"]
    for rank in range(node * per_node, (node + 1) * per_node):
        dump = {"version": "2.10", "pg_config": {}, "pg_status": {}, "entries": []}
        Path(f"{prefix}{rank}").write_bytes(pickle.dumps(dump))
    os.kill(os.getpid(), signal.SIGABRT)
    return 134


if __name__ == "__main__":
    sys.exit(main())
