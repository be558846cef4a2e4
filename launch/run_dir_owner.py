"""The run directory a command submits into must be the user's (training/checkpoint/ownership.py): another user who
created it first could have planted a checkpoint or a config the job would read. Shared by llm-submit and llm-eval."""

from __future__ import annotations

from pathlib import Path

from slurm.errors import SubmitError
from training.checkpoint.ownership import NotOwnedError, check_if_present


def check_run_dir_owner(run_dir: Path) -> None:
    """A run directory that exists must be the user's (or one of their groups'); refused in one line otherwise."""
    try:
        check_if_present(run_dir, "--run-dir:")
    except NotOwnedError as refused:
        raise SubmitError(str(refused)) from None
