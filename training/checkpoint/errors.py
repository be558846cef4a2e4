"""Checkpoint failures stop the job: a run that cannot save must not keep training (the lost weeks of
"Maximizing training throughput using PyTorch FSDP", https://pytorch.org/blog/maximizing-training/)."""


class CheckpointError(RuntimeError):
    """Saving or loading a checkpoint failed; the message says which and names the last good checkpoint."""


class CheckpointSpaceError(CheckpointError):
    """Not enough free space for the next checkpoint; raised before anything is written."""
