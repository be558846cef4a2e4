"""The contract between the NeMo Framework entry points (nemo_pretrain.py, bridge_pretrain.py) and the batch script
(launch/jobs/nemo.sh, launch/jobs/common.sh): the rendered config they read, the dotted overrides they apply to the
framework's recipe, and the exit status they report (same file and codes as the FSDP trainer, training/signals.py).

The entry points run by path inside the container (`python launch/jobs/<entry>.py`), where the repo's packages are
not importable but their own directory is (sys.path[0]): they import this module as a sibling there, and as
launch.jobs.job_contract when imported as package modules (the tests). So it needs only the standard library and
PyYAML, like them.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

# The exit codes of training/signals.py, repeated: the container runs the entry points without the repo's packages.
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CONFIG_ERROR = 2
EXIT_REQUEUE = 42
STOP_SIGNAL = signal.SIGUSR1

Configure = Callable[[dict[str, Any]], Callable[[], None]]


class OverrideError(AttributeError):
    """An override names a field the target does not have (a typo must not silently add a new attribute)."""


class StoppedOnSignal(Exception):
    """Training stopped on STOP_SIGNAL after the framework saved a checkpoint: the job is to be requeued."""


def config_argument(argv: list[str] | None, description: str) -> str:
    """The rendered config the entry point is started with: `--config RUN_DIR/<framework>-config.yaml`."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--config", required=True)
    config: str = parser.parse_args(argv).config
    return config


def apply_overrides(target: Any, overrides: dict[str, Any], what: str = "config") -> None:
    """Set each dotted field of `target` (NeMo 2's recipe, Megatron Bridge's ConfigContainer); `what` names it."""
    for dotted, value in overrides.items():
        *parents, leaf = dotted.split(".")
        node = target
        walked = []
        for name in parents:
            walked.append(name)
            if not hasattr(node, name):
                raise OverrideError(f"override {dotted!r}: the {what} has no {'.'.join(walked)!r}")
            node = getattr(node, name)
        if not hasattr(node, leaf):
            raise OverrideError(f"override {dotted!r}: the {what} has no {dotted!r}")
        setattr(node, leaf, value)


def load_config(path: str | Path, required: tuple[str, ...]) -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    missing = [key for key in required if key not in config]
    if missing:
        raise ValueError(f"{path}: missing {', '.join(missing)}")
    return config


def write_exit_status(path: str | None, code: int, reason: str, every_rank: bool = False) -> None:
    """The verdict for the batch script (same format as training/signals.py), written whole (rename).

    Rank 0 reports a finished run. Any other ending (a stop to requeue, an error) is reported by every rank:
    its non-zero exit makes srun's --kill-on-bad-exit kill the other ranks, rank 0 included, before they write.
    """
    rank = os.environ.get("SLURM_PROCID", "0")
    if not path or (rank != "0" and code == EXIT_OK and not every_rank):
        return
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    status = {"exit_code": code, "reason": reason, "step": None, "time": round(time.time(), 3)}
    partial = target.with_name(f"{target.name}.{rank}.partial")
    partial.write_text(json.dumps(status) + "\n", encoding="utf-8")
    os.replace(partial, target)


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".replace('"', "'")


def run_job(config_path: str, load: Callable[[str], dict[str, Any]], configure: Configure, name: str) -> int:
    """Load and configure (config error on failure), train (failure on error), then report: done, or stopped to
    requeue (train() raised StoppedOnSignal). `name` is the entry point's, for its stderr line."""
    status_file: str | None = None
    try:
        config = load(config_path)
        status_file = config.get("exit_status_file")
        train = configure(config)
    except Exception as error:  # every start-up failure is a configuration error
        traceback.print_exc()
        reason = f"configuration error: {first_line(error)}"
        write_exit_status(status_file, EXIT_CONFIG_ERROR, reason, every_rank=True)
        print(f"{name}: {reason}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    try:
        train()
    except StoppedOnSignal:
        write_exit_status(status_file, EXIT_REQUEUE, f"stopped on {STOP_SIGNAL.name} after a checkpoint")
        return EXIT_REQUEUE
    except Exception as error:  # the batch script decides whether a retry may help
        traceback.print_exc()
        write_exit_status(status_file, EXIT_FAILED, f"training failed: {first_line(error)}", every_rank=True)
        return EXIT_FAILED
    write_exit_status(status_file, EXIT_OK, "finished")
    return EXIT_OK
