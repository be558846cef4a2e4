"""Runs inside the NeMo Framework container (26.08: Megatron Bridge), one process per GPU under srun:
`python launch/jobs/bridge_pretrain.py --config RUN_DIR/bridge-config.yaml`

The config (rendered by `python -m launch.submit --backend nemo` when the spec's cluster.containers.nemo_framework
is megatron-bridge-*) names a Megatron Bridge recipe function, dotted overrides of its ConfigContainer (parallel
sizes, schedule, checkpoints, logging), the Hugging Face config directory of our model shape and the dataset (our
.bin/.idx prefix and tokenizer).

The Llama recipes ask AutoBridge for a Hub model id (meta-llama/...); the cluster cannot reach the Hub, and the shape
must be ours, so the recipe is built with the run's `hf_model_root` as working directory, where `<model id>/config.json`
is the rendered config: transformers reads a relative model id that names a local directory from that directory.

Stopping and requeueing follow the FSDP trainer's contract (training/signals.py): SIGUSR1 (SLURM's time-limit
warning, forwarded by the batch script) reaches Megatron Bridge's own signal handler (train.exit_signal_handler with
train.exit_signal = SIGUSR1), which saves a checkpoint at the end of the step and leaves pretrain() by sys.exit(0);
every rank then writes the exit-status file with EXIT_REQUEUE and the batch script requeues the job. The requeued job
loads the latest checkpoint from checkpoint.load (the directory it saves to). Anything that fails before training
(a bad override, ConfigContainer.validate() refusing the layout, an image without Megatron Bridge) is a configuration
error: EXIT_CONFIG_ERROR, never requeued.

Megatron Bridge is imported only in build_config() and the functions below it, so the override and exit logic is
testable without it; that logic is shared with nemo_pretrain.py in job_contract.py, this file's sibling (see there for
the import).
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

if __package__:  # imported as launch.jobs.bridge_pretrain (the tests)
    from . import job_contract
else:  # run by path in the container: sys.path[0] is launch/jobs, the repo's packages are not importable
    import job_contract  # type: ignore[import-not-found,no-redef]  # mypy checks the package import above

# A finetune: block (launch/bridge_finetune.py) makes it Bridge's SFT/PEFT recipe on {"input","output"} JSONL.
REQUIRED_KEYS = ("recipe_module", "recipe", "hf_model_id", "hf_model_root", "overrides", "data")


def load_config(path: str | Path) -> dict[str, Any]:
    return job_contract.load_config(path, REQUIRED_KEYS)


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
        raise FileNotFoundError(f"hf_model_root: no {model_dir / 'config.json'} (rendered by launch.submit)")
    finetune = config.get("finetune")
    with working_directory(config["hf_model_root"]):
        if finetune is not None and finetune["lora"] is not None:
            container = getattr(recipes, config["recipe"])(peft_scheme=canonical_lora(finetune["lora"]))
        else:
            container = getattr(recipes, config["recipe"])()
    job_contract.apply_overrides(container, config["overrides"], "config")
    data = config["data"]
    if finetune is not None:
        sft_dataset(container, finetune, data)
    else:
        gpt_dataset(container, data)
    container.tokenizer.tokenizer_type = "HuggingFaceTokenizer"
    container.tokenizer.tokenizer_model = data["tokenizer"]
    container.tokenizer.vocab_size = None
    # The recipes size the embedding and output layers from the tokenizer (and pad them for TP) when this is on;
    # off, setup() keeps the model's vocab_size, the rendered HF config's, which llm-submit checked holds the
    # tokenizer: the model that trains is the one the job, the planner and the export describe.
    container.tokenizer.use_tokenizer_vocab_size = False
    # The signal our batch script forwards before the time limit.
    container.train.exit_signal = job_contract.STOP_SIGNAL
    return container


def blend_of(paths: list[Any]) -> tuple[list[str], list[float] | None]:
    """Megatron's blend list (launch.nemo.megatron_blend: [prefix], or [w1, p1, w2, p2, ...] for a mixture) as the
    (prefixes, weights) GPTDatasetConfig.blend takes, as megatron-core's get_blend_from_list reads it (a test
    compares them; imported here it would load megatron-core for every job config)."""
    if len(paths) == 1:
        return [str(paths[0])], None
    return [str(prefix) for prefix in paths[1::2]], [float(weight) for weight in paths[0::2]]


def gpt_dataset(container: Any, data: dict[str, Any]) -> None:
    # The train, validation, test split in thousandths.
    prefixes, weights = blend_of(data["paths"])
    container.dataset.blend = ([str(Path(p).resolve()) for p in prefixes], weights)
    container.dataset.split = data["split"]
    container.dataset.seq_length = data["seq_length"]
    container.dataset.random_seed = data["seed"]


def canonical_lora(lora: dict[str, Any]) -> Any:
    """Bridge's CanonicalLoRA: q, k, v and gate, up adapted separately, as Hugging Face's PEFT does."""
    from megatron.bridge.peft.canonical_lora import CanonicalLoRA

    return CanonicalLoRA(
        target_modules=list(lora["target_modules"]), dim=lora["dim"], alpha=lora["alpha"], dropout=lora["dropout"]
    )


def link_sft_splits(dataset_root: str | Path, work_dir: str | Path) -> Path:
    """The staged JSONL linked into the run directory: Bridge writes its index and packed files beside the JSONL it
    reads, and the dataset directory is the data perimeter's, not the job's. Idempotent (a requeue finds them)."""
    work = Path(work_dir)
    work.mkdir(parents=True, exist_ok=True)
    for name in ("training.jsonl", "validation.jsonl"):
        link = work / name
        with contextlib.suppress(FileExistsError):  # every rank links; the first one wins
            link.symlink_to(Path(dataset_root).resolve() / name)
    return work


def sft_dataset(container: Any, finetune: dict[str, Any], data: dict[str, Any]) -> None:
    """The recipe's GPTSFTDataset config (SQuAD from the Hub by default) pointed at our JSONL: local source, loss on
    the output only (Bridge's answer_only_loss), packed offline into one sequence per micro-batch whose cu_seqlens
    keep each sample's attention to itself."""
    from megatron.bridge.data.packing import PackedSequenceSpecs

    dataset = container.dataset
    dataset.dataset_root = str(link_sft_splits(finetune["dataset_root"], finetune["work_dir"]))
    dataset.hf_dataset = None
    dataset.hf_validation_proportion = None
    dataset.do_test = False
    dataset.seq_length = data["seq_length"]
    dataset.seed = data["seed"]
    dataset.enable_offline_packing = True
    dataset.offline_packing_specs = PackedSequenceSpecs(
        packed_sequence_size=data["seq_length"], pad_seq_to_mult=finetune["pad_seq_to_mult"]
    )


def run_job(config_path: str, configure: job_contract.Configure) -> int:
    return job_contract.run_job(config_path, load_config, configure, "bridge_pretrain")


def stop_of(exit_: SystemExit) -> Exception:
    """What pretrain()'s sys.exit means: code 0 is the signal stop (the only exit condition the job sets:
    exit_duration_in_mins and exit_interval are off); anything else is Megatron's rerun machine giving up."""
    if exit_.code in (0, None):
        return job_contract.StoppedOnSignal()
    return RuntimeError(f"pretrain exited with status {exit_.code}")


def _configure(config: dict[str, Any]) -> Callable[[], None]:
    from megatron.bridge.training.config import runtime_config_update
    from megatron.bridge.training.finetune import finetune
    from megatron.bridge.training.gpt_step import forward_step
    from megatron.bridge.training.pretrain import pretrain

    container = build_config(config)
    run = finetune if config.get("finetune") is not None else pretrain  # finetune(): pretrain() from an init
    # What pretrain() does first (mixed precision, data-parallel size, ConfigContainer.validate(): the parallel
    # layout against the world size, batch sizes, scheduler steps, checkpoint settings), now, before any GPU work,
    # on a copy: pretrain() runs it again on the container itself.
    runtime_config_update(copy.deepcopy(container))

    def train() -> None:
        try:
            run(container, forward_step)
        except SystemExit as exit_:
            raise stop_of(exit_) from None

    return train


def main(argv: list[str] | None = None) -> int:
    # srun already started one process per GPU: the recipe runs in this process, no launcher of its own.
    return run_job(
        job_contract.config_argument(argv, "Megatron Bridge pretraining from a rendered recipe override file"),
        _configure,
    )


if __name__ == "__main__":
    raise SystemExit(main())
