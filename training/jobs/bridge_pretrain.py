"""Runs inside the NeMo Framework container (26.08: Megatron Bridge), one process per GPU under srun:
`python training/jobs/bridge_pretrain.py --config RUN_DIR/bridge-config.yaml`

The config (rendered by `python -m training.submit --backend nemo` when the spec's cluster.containers.nemo_framework
is megatron-bridge-*) names a Megatron Bridge recipe function, dotted overrides of its ConfigContainer (parallel
sizes, schedule, checkpoints, logging), the Hugging Face config directory of our model shape and the dataset (our
.bin/.idx prefix and tokenizer).

The Llama recipes ask AutoBridge for a Hub model id (meta-llama/...); the cluster cannot reach the Hub, and the shape
must be ours, so the recipe is built with the run's `hf_model_root` as working directory, where `<model id>/config.json`
is the rendered config: transformers reads a relative model id that names a local directory from that directory.

Stopping and requeueing follow the FSDP trainer's contract (training/signals.py): SIGUSR1 (SLURM's time-limit
warning, forwarded by the batch script) reaches Megatron Bridge's own signal handler (train.exit_signal_handler with
train.exit_signal = SIGUSR1), which saves a checkpoint at the end of the step and leaves pretrain() by sys.exit(0);
rank 0 then writes the exit-status file with EXIT_REQUEUE and the batch script requeues the job. The requeued job
loads the latest checkpoint from checkpoint.load (the directory it saves to). Anything that fails before training
(a bad override, ConfigContainer.validate() refusing the layout, an image without Megatron Bridge) is a configuration
error: EXIT_CONFIG_ERROR, never requeued.

Megatron Bridge is imported only in build_config() and the functions below it, so the override and exit logic is
testable without it. The helpers repeat nemo_pretrain.py's: the container runs this file without the repo's packages.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

# The exit codes of training/signals.py, repeated: the container runs this file without the repo's packages.
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CONFIG_ERROR = 2
EXIT_REQUEUE = 42
STOP_SIGNAL = signal.SIGUSR1

REQUIRED_KEYS = ("recipe_module", "recipe", "hf_model_id", "hf_model_root", "overrides", "data")


class OverrideError(AttributeError):
    """An override names a field the config does not have (a typo must not silently add a new attribute)."""


class StoppedOnSignal(Exception):
    """pretrain() left through sys.exit(0): its signal handler saved a checkpoint and stopped."""


def apply_overrides(config: Any, overrides: dict[str, Any]) -> None:
    for dotted, value in overrides.items():
        *parents, leaf = dotted.split(".")
        node = config
        walked = []
        for name in parents:
            walked.append(name)
            if not hasattr(node, name):
                raise OverrideError(f"override {dotted!r}: the config has no {'.'.join(walked)!r}")
            node = getattr(node, name)
        if not hasattr(node, leaf):
            raise OverrideError(f"override {dotted!r}: the config has no {dotted!r}")
        setattr(node, leaf, value)


def load_config(path: str | Path) -> dict[str, Any]:
    config = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    missing = [key for key in REQUIRED_KEYS if key not in config]
    if missing:
        raise ValueError(f"{path}: missing {', '.join(missing)}")
    return config


@contextlib.contextmanager
def working_directory(path: str | Path) -> Iterator[None]:
    previous = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)


def build_config(config: dict[str, Any]) -> Any:
    """The ConfigContainer exactly as the job trains it: Megatron Bridge's recipe, our overrides, data and stop."""
    recipes = importlib.import_module(config["recipe_module"])
    model_dir = Path(config["hf_model_root"]) / config["hf_model_id"]
    if not (model_dir / "config.json").is_file():
        raise FileNotFoundError(f"hf_model_root: no {model_dir / 'config.json'} (rendered by training.submit)")
    with working_directory(config["hf_model_root"]):
        container = getattr(recipes, config["recipe"])()
    apply_overrides(container, config["overrides"])
    data = config["data"]
    # Our .bin/.idx prefixes, unweighted; train,validation,test split in thousandths.
    container.dataset.blend = ([str(Path(p).resolve()) for p in data["paths"]], None)
    container.dataset.split = data["split"]
    container.dataset.seq_length = data["seq_length"]
    container.dataset.random_seed = data["seed"]
    container.tokenizer.tokenizer_type = "HuggingFaceTokenizer"
    container.tokenizer.tokenizer_model = data["tokenizer"]
    container.tokenizer.vocab_size = None
    # The signal our batch script forwards before the time limit.
    container.train.exit_signal = STOP_SIGNAL
    return container


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


def run_job(config_path: str, configure: Callable[[dict[str, Any]], Callable[[], None]]) -> int:
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
        print(f"bridge_pretrain: {reason}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    try:
        train()
    except StoppedOnSignal:
        write_exit_status(status_file, EXIT_REQUEUE, f"stopped on {STOP_SIGNAL.name} after a checkpoint")
        return EXIT_REQUEUE
    except Exception as error:  # the batch script decides whether a retry may help
        traceback.print_exc()
        write_exit_status(status_file, EXIT_FAILED, f"training failed: {_first_line(error)}", every_rank=True)
        return EXIT_FAILED
    write_exit_status(status_file, EXIT_OK, "finished")
    return EXIT_OK


def stop_of(exit_: SystemExit) -> Exception:
    """What pretrain()'s sys.exit means: code 0 is the signal stop (the only exit condition the job sets:
    exit_duration_in_mins and exit_interval are off); anything else is Megatron's rerun machine giving up."""
    if exit_.code in (0, None):
        return StoppedOnSignal()
    return RuntimeError(f"pretrain exited with status {exit_.code}")


def _configure(config: dict[str, Any]) -> Callable[[], None]:
    from megatron.bridge.training.config import runtime_config_update
    from megatron.bridge.training.gpt_step import forward_step
    from megatron.bridge.training.pretrain import pretrain

    container = build_config(config)
    # What pretrain() does first (mixed precision, data-parallel size, ConfigContainer.validate(): the parallel
    # layout against the world size, batch sizes, scheduler steps, checkpoint settings), now, before any GPU work,
    # on a copy: pretrain() runs it again on the container itself.
    runtime_config_update(copy.deepcopy(container))

    def train() -> None:
        try:
            pretrain(container, forward_step)
        except SystemExit as exit_:
            raise stop_of(exit_) from None

    return train


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Megatron Bridge pretraining from a rendered recipe override file")
    parser.add_argument("--config", required=True)
    args = parser.parse_args(argv)
    # srun already started one process per GPU: the recipe runs in this process, no launcher of its own.
    return run_job(args.config, _configure)


if __name__ == "__main__":
    raise SystemExit(main())
