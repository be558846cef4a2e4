"""Runs inside the NeMo 2 container, one process per GPU under srun:
`python training/jobs/nemo_pretrain.py --config RUN_DIR/nemo-config.yaml`

The config (rendered by `python -m training.submit --backend nemo`) names a NeMo 2 recipe, dotted overrides
of its fields (shape, schedule, parallelism, checkpoints) and the dataset (our .bin/.idx prefix and tokenizer).

Stopping and requeueing follow the FSDP trainer's contract (training/signals.py): SIGUSR1 (SLURM's time-limit
warning, forwarded by the batch script) reaches NeMo's PreemptionCallback, which checkpoints at the end of the
step and stops; rank 0 then writes the exit-status file with EXIT_REQUEUE and the batch script requeues the job.
Anything that fails while the recipe is built (a bad override, a trainer setting Lightning refuses, an image
without NeMo) is a configuration error: EXIT_CONFIG_ERROR, never requeued. Lightning's own SLURM requeue is off:
it would call `scontrol`, which the container does not have.

NeMo is imported only in build_recipe() and main(), so the override and exit logic is testable without it.
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

# The exit codes of training/signals.py, repeated: the container runs this file without the repo's packages.
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CONFIG_ERROR = 2
EXIT_REQUEUE = 42
STOP_SIGNAL = signal.SIGUSR1

REQUIRED_KEYS = ("recipe", "name", "log_dir", "num_nodes", "gpus_per_node", "overrides", "data")


class OverrideError(AttributeError):
    """An override names a field the recipe does not have (a typo must not silently add a new attribute)."""


def apply_overrides(recipe: Any, overrides: dict[str, Any]) -> None:
    for dotted, value in overrides.items():
        *parents, leaf = dotted.split(".")
        node = recipe
        walked = []
        for name in parents:
            walked.append(name)
            if not hasattr(node, name):
                raise OverrideError(f"override {dotted!r}: the recipe has no {'.'.join(walked)!r}")
            node = getattr(node, name)
        if not hasattr(node, leaf):
            raise OverrideError(f"override {dotted!r}: the recipe has no {dotted!r}")
        setattr(node, leaf, value)


def load_config(path: str | Path) -> dict[str, Any]:
    config = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    missing = [key for key in REQUIRED_KEYS if key not in config]
    if missing:
        raise ValueError(f"{path}: missing {', '.join(missing)}")
    return config


def build_recipe(config: dict[str, Any]) -> Any:
    """The recipe exactly as the job trains it: NeMo's own recipe, our overrides, our data, our stop handling."""
    import nemo_run as run
    from lightning.pytorch.plugins.environments import SLURMEnvironment
    from nemo.collections import llm
    from nemo.collections.common.tokenizers.huggingface.auto_tokenizer import AutoTokenizer
    from nemo.lightning.pytorch.callbacks import PreemptionCallback

    recipe = getattr(llm, config["recipe"]).pretrain_recipe(
        name=config["name"],
        dir=config["log_dir"],
        num_nodes=config["num_nodes"],
        num_gpus_per_node=config["gpus_per_node"],
    )
    apply_overrides(recipe, config["overrides"])
    data = config["data"]
    recipe.data = run.Config(
        llm.PreTrainingDataModule,
        paths=data["paths"],
        seq_length=data["seq_length"],
        global_batch_size=data["global_batch_size"],
        micro_batch_size=data["micro_batch_size"],
        split=data["split"],
        seed=data["seed"],
        tokenizer=run.Config(AutoTokenizer, pretrained_model_name=data["tokenizer"]),
    )
    # What NeMo-Run's PreemptionPlugin adds, on the signal our batch script forwards.
    recipe.trainer.callbacks = [*(recipe.trainer.callbacks or []), run.Config(PreemptionCallback, sig=STOP_SIGNAL)]
    recipe.trainer.strategy.cluster_environment = run.Config(SLURMEnvironment, auto_requeue=False)
    return recipe


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


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".replace('"', "'")


def run_job(
    config_path: str,
    configure: Callable[[dict[str, Any]], Callable[[], Any]],
    interrupted: Callable[[Any], bool],
) -> int:
    """Configure (config error on failure), train (failure on error), then report: done, or stopped to requeue."""
    status_file: str | None = None
    try:
        config = load_config(config_path)
        status_file = config.get("exit_status_file")
        train = configure(config)
    except Exception as error:  # every start-up failure is a configuration error
        traceback.print_exc()
        reason = f"configuration error: {_first_line(error)}"
        write_exit_status(status_file, EXIT_CONFIG_ERROR, reason, every_rank=True)
        print(f"nemo_pretrain: {reason}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    try:
        trained = train()
    except Exception as error:  # the batch script decides whether a retry may help
        traceback.print_exc()
        write_exit_status(status_file, EXIT_FAILED, f"training failed: {_first_line(error)}", every_rank=True)
        return EXIT_FAILED
    if interrupted(trained):
        write_exit_status(status_file, EXIT_REQUEUE, f"stopped on {STOP_SIGNAL.name} after a checkpoint")
        return EXIT_REQUEUE
    write_exit_status(status_file, EXIT_OK, "finished")
    return EXIT_OK


def _configure(config: dict[str, Any]) -> Callable[[], Any]:
    import fiddle as fdl

    # Building constructs the trainer, its callbacks (ModelCheckpoint validates its triggers here), the strategy
    # and the data module: every setting the libraries refuse is refused now, before any GPU work.
    task = fdl.build(build_recipe(config))

    def train() -> Any:
        task()
        return task.keywords["trainer"]

    return train


def _preempted(trainer: Any) -> bool:
    from nemo.lightning.pytorch.callbacks import PreemptionCallback

    return any(isinstance(cb, PreemptionCallback) and cb.interrupted for cb in trainer.callbacks)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="NeMo 2 pretraining from a rendered recipe override file")
    parser.add_argument("--config", required=True)
    args = parser.parse_args(argv)
    # srun already started one process per GPU: the recipe runs in this process, no executor of its own.
    return run_job(args.config, _configure, _preempted)


if __name__ == "__main__":
    raise SystemExit(main())
