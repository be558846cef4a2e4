"""Checkpoint failures stop the job: a run that cannot save must not keep training (seed 000's lost weeks)."""


class CheckpointError(RuntimeError):
    """Saving or loading a checkpoint failed; the message says which and names the last good checkpoint."""


class CheckpointSpaceError(CheckpointError):
    """Not enough free space for the next checkpoint; raised before anything is written."""
