"""Parallelism applied to a plain model: activation checkpointing, torch.compile, FSDP2 / HSDP."""
