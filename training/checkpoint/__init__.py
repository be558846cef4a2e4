"""Sharded DCP checkpoints with an atomic commit, retention, free-space checks; HF safetensors import."""
