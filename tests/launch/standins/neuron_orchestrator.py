"""Stand-in for NxDT's examples/training_orchestrator.py when a rank hangs (no Trainium here): the ranks step in
lockstep through real gloo all-reduces whose timeout is the rendered config's `neuron_rt_exec_timeout`, as the
Neuron runtime fails a stuck execution after NEURON_RT_EXEC_TIMEOUT. On the first attempt, rank STANDIN_STOP_RANK
stops itself (SIGSTOP) at step 3, a frozen process: its peers' collective times out and they fail, as the live
ranks do on Trainium. A requeued attempt trains every step and finishes.

    python training_orchestrator.py --config-path DIR --config-name NAME [overrides...]
"""

from __future__ import annotations

import datetime
import os
import signal
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import yaml

STEPS = 6
STOP_AT_STEP = 3


def main() -> int:
    config_path = Path(sys.argv[sys.argv.index("--config-path") + 1])
    config_name = sys.argv[sys.argv.index("--config-name") + 1]
    config = yaml.safe_load((config_path / f"{config_name}.yaml").read_text())
    timeout = datetime.timedelta(seconds=config["neuron_rt_exec_timeout"])
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    first_attempt = int(os.environ.get("SLURM_RESTART_COUNT", "0")) == 0
    for step in range(STEPS):
        if first_attempt and step == STOP_AT_STEP and rank == int(os.environ["STANDIN_STOP_RANK"]):
            os.kill(os.getpid(), signal.SIGSTOP)
        value = torch.ones(1)
        dist.all_reduce(value)
        print(f"rank {rank} step {step} sum {int(value.item())}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
