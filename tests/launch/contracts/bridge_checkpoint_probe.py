"""Runs in .bridge-venv (Megatron Bridge 0.6.0), never in the repo's venv; Megatron Bridge's own code on either side of
a checkpoint directory (tests/training/checkpoint/test_framework_replica.py):

    bridge_checkpoint_probe.py write ITER_DIR STEP     # train_state.pt of iteration STEP, as save_checkpoint writes it
    bridge_checkpoint_probe.py read CHECKPOINTS_DIR    # what load_checkpoint would resume from there

`write` saves TrainState(step=STEP).state_dict() with torch.save, as rank 0's finalize does. `read` answers with
Megatron Bridge's own readers: checkpoint_exists (pretrain() resumes only when it says so), the step in
latest_train_state.pt (read_train_state, what the loader reads first), the legacy tracker (checkpointing.read_metadata,
its fallback) and the iteration directory get_checkpoint_name gives for that step. Prints one JSON line.
"""

from __future__ import annotations

import json
import sys

from bridge_probe import AbsentTEFinder  # a sibling: the probes run by path


def main() -> int:
    sys.meta_path.insert(0, AbsentTEFinder())
    import torch
    from megatron.bridge.training.checkpointing import read_metadata
    from megatron.bridge.training.state import TrainState
    from megatron.bridge.training.utils.checkpoint_utils import (
        TRACKER_PREFIX,
        TRAIN_STATE_FILE,
        checkpoint_exists,
        get_checkpoint_name,
        get_checkpoint_tracker_filename,
        get_checkpoint_train_state_filename,
        read_train_state,
    )

    action, path = sys.argv[1], sys.argv[2]
    if action == "write":
        state = TrainState()
        state.step = int(sys.argv[3])
        torch.save(state.state_dict(), f"{path}/{TRAIN_STATE_FILE}")
        print(json.dumps({"written": f"{path}/{TRAIN_STATE_FILE}"}))
        return 0
    step = read_train_state(get_checkpoint_train_state_filename(path, prefix=TRACKER_PREFIX)).step
    iteration, release = read_metadata(get_checkpoint_tracker_filename(path))
    print(
        json.dumps(
            {
                "checkpoint_exists": checkpoint_exists(path),
                "train_state_step": int(step),
                "tracker": [iteration, release],
                "iteration_dir": get_checkpoint_name(path, int(step)),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
