"""A real Trainer for the benchmarks: one gloo process, a job config written like the shipped ones."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from training.config import parse_job_config
from training.parallel.dist import init_distributed
from training.trainer import Trainer


def bench_trainer(run_dir: Path, data_prefix: Path, model: dict[str, Any], data: dict[str, Any]) -> Trainer:
    """Trainer over `data_prefix` (world size 1), checkpoints synchronous, no validation, plots or TensorBoard."""
    job = {
        "model": model,
        "data": {"prefix": str(data_prefix), "validation_fraction": 0.01, **data},
        "train": {"max_steps": 1_000_000, "eval_every": 0, "log_every": 1},
        "optim": {"lr": 3e-4, "warmup_steps": 10},
        "checkpoint": {"every": "off", "keep_last": 2, "async_save": False},
        "metrics": {"tensorboard": False, "plot": False, "peak_flops": 1e12},
    }
    logging.getLogger("training").setLevel(logging.WARNING)
    return Trainer(parse_job_config(job, source="bench"), run_dir, init_distributed())
