"""`python -m training.train --config FILE --run-dir DIR [--max-steps N] [--checkpoint-every N]`

Runs the same under torchrun (env://), srun (SLURM_* variables) or as one process. Running the same command
again resumes from the latest committed checkpoint in DIR. Exit codes: training/signals.py.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import sys
from pathlib import Path

from spec.cli import OneLineParser
from training.checkpoint.errors import CheckpointError
from training.checkpoint.ownership import NotOwnedError, check_if_present
from training.config import ConfigError, JobConfig, every_option, load_job_config, resolve_deterministic
from training.data.errors import DataError
from training.errors import LossGuardError
from training.models.args import ModelArgsError
from training.signals import (
    EXIT_CHECKPOINT_FAILED,
    EXIT_CONFIG_ERROR,
    EXIT_LOSS_GUARD,
    EXIT_NOT_OWNED,
    EXIT_OK,
    EXIT_REQUEUE,
    EXIT_STATUS_FILE,
    write_exit_status,
)

log = logging.getLogger("training")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = OneLineParser(prog="python -m training.train", description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="job config YAML (see training/configs/)")
    parser.add_argument("--run-dir", required=True, help="run directory: checkpoints, metrics, plots, traces")
    parser.add_argument("--max-steps", type=int, help="override train.max_steps")
    parser.add_argument(
        "--checkpoint-every", type=every_option, help="override checkpoint.every (off: only at the end and on a stop)"
    )
    return parser.parse_args(argv)


def _configure_logging(rank: int) -> None:
    logging.basicConfig(
        level=logging.INFO if rank == 0 else logging.WARNING,
        format=f"%(asctime)s rank{rank} %(levelname)s %(message)s",
        stream=sys.stdout,
        force=True,
    )


def load_config(path: str, max_steps: int | None = None, checkpoint_every: int | str | None = None) -> JobConfig:
    config = load_job_config(path)
    overrides: dict[str, int | str] = {}
    if max_steps is not None:
        overrides["train.max_steps"] = max_steps
    if checkpoint_every is not None:
        overrides["checkpoint.every"] = checkpoint_every
    return config.with_overrides(**overrides) if overrides else config


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rank = int(os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0")))
    _configure_logging(rank)
    run_dir = Path(args.run_dir)
    try:
        config = load_config(args.config, args.max_steps, args.checkpoint_every)
    except ConfigError as error:
        log.error("%s", error)
        return EXIT_CONFIG_ERROR
    try:  # before anything is written there: not even the exit status goes into another user's directory
        check_if_present(run_dir, "--run-dir")
    except NotOwnedError as error:
        log.error("exit %d: %s", EXIT_NOT_OWNED, error)
        return EXIT_NOT_OWNED
    # Imported here so a config error is reported without paying for torch.distributed start-up.
    import torch

    from training.parallel.dist import init_distributed, shutdown_distributed
    from training.trainer import Trainer

    # cuBLAS needs this before its first call to run deterministically.
    if resolve_deterministic(config.train.deterministic, "cuda" if torch.cuda.is_available() else "cpu"):
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

    ctx = init_distributed()
    if ctx.is_main:  # a crash must not leave the previous attempt's status behind for the job script to read
        (run_dir / EXIT_STATUS_FILE).unlink(missing_ok=True)
    trainer = None
    code, reason = EXIT_OK, "finished"
    try:
        trainer = Trainer(config, run_dir, ctx)
        outcome = trainer.run()
        if outcome == "stopped":
            code = EXIT_REQUEUE
            reason = f"stopped on request ({trainer.stop_request.signal_name or 'signal on another rank'})"
    except (ConfigError, ModelArgsError, DataError) as error:
        code, reason = EXIT_CONFIG_ERROR, str(error)
    except LossGuardError as error:
        code, reason = EXIT_LOSS_GUARD, str(error)
    except NotOwnedError as error:
        code, reason = EXIT_NOT_OWNED, str(error)
    except CheckpointError as error:
        code, reason = EXIT_CHECKPOINT_FAILED, str(error)
    step = trainer.step if trainer is not None else None
    if code != EXIT_OK:
        (log.warning if code == EXIT_REQUEUE else log.error)("exit %d: %s", code, reason)
    if ctx.is_main:
        write_exit_status(run_dir, code, reason, step)
    shutdown_distributed()
    # The trainer's reference cycles (model, optimizer, process-group handles, loader threads) are freed now, while
    # the interpreter is whole. Left to the collector at interpreter exit, they were freed in an order that aborted
    # about one 2-rank exit in ten (SIGABRT, "terminate called without an active exception", after this function
    # had returned its code), and the job script requeued a run that had ended for good.
    trainer = None
    gc.collect()
    return code


if __name__ == "__main__":
    sys.exit(main())
