"""Stand-in for the Megatron Bridge container step on the local cluster (no GPUs, no Megatron): it resumes and saves
checkpoints in Megatron Bridge's layout (training/checkpoint/framework_layout.py: iter_NNNNNNN/ with every rank's
shards, then rank 0's train_state.pt, latest_train_state.pt, the tracker, run_config.yaml), so that the job script's
replica watcher sees what it would see beside the real step.

    python bridge_checkpoints_step.py --config RUN_DIR/bridge-config.yaml

Rank 0 resumes from the tracker in checkpoint.save (0 when there is none) and records where in RUN_DIR/standin-starts
(one JSON line per start). A run that starts from 0 saves iterations 10 and 20, then starts iteration 30's save and
never finishes it (shards, no train_state.pt: what a kill mid-save leaves), marking RUN_DIR/standin-saving-30, and
waits to be killed. A run that resumed saves every 10 iterations up to 40 and ends. Rank 1 waits for rank 0's end.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from launch.jobs import bridge_pretrain
from launch.jobs.job_contract import EXIT_OK, write_exit_status

EVERY, LAST = 10, 40


def save(checkpoints: Path, step: int, finish: bool) -> None:
    iteration = checkpoints / f"iter_{step:07d}"
    iteration.mkdir(parents=True, exist_ok=True)
    for rank in range(2):
        (iteration / f"__{rank}_0.distcp").write_bytes(os.urandom(256 * 1024))
    (iteration / ".metadata").write_bytes(os.urandom(1024))
    if not finish:
        return
    (iteration / "train_state.pt").write_bytes(json.dumps({"step": step}).encode())
    shutil.copy(iteration / "train_state.pt", checkpoints / "latest_train_state.pt")
    (checkpoints / "latest_checkpointed_iteration.txt").write_text(str(step))
    (iteration / "run_config.yaml").write_text(f"train:\n  step: {step}\n")


def main() -> int:
    config = bridge_pretrain.load_config(sys.argv[sys.argv.index("--config") + 1])
    status = Path(config["exit_status_file"])
    run_dir = status.parent
    finished = run_dir / f"standin-finished.{os.environ['SLURM_JOB_ID']}"
    if os.environ["SLURM_PROCID"] != "0":
        while not finished.exists():
            time.sleep(0.1)
        return EXIT_OK
    checkpoints = Path(config["overrides"]["checkpoint.save"])
    tracker = checkpoints / "latest_checkpointed_iteration.txt"
    resumed = int(tracker.read_text()) if tracker.exists() else 0
    with (run_dir / "standin-starts").open("a") as starts:
        starts.write(json.dumps({"job": os.environ["SLURM_JOB_ID"], "resumed": resumed, "time": time.time()}) + "\n")
    if resumed == 0:
        save(checkpoints, 10, finish=True)
        save(checkpoints, 20, finish=True)
        save(checkpoints, 30, finish=False)
        (run_dir / "standin-saving-30").touch()
        while True:  # killed mid-save
            time.sleep(1)
    for step in range(resumed + EVERY, LAST + 1, EVERY):
        save(checkpoints, step, finish=True)
    write_exit_status(str(status), EXIT_OK, "finished")
    finished.touch()
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
