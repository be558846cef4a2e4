"""Errors the entry point maps to exit codes, importable without torch (training/train.py reports config errors
before paying for torch's start-up)."""


class LossGuardError(RuntimeError):
    """Training must stop: the failing step's update was not applied (training/guards.py)."""
