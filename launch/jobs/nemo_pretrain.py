"""Runs inside the NeMo 2 container, one process per GPU under srun:
`python launch/jobs/nemo_pretrain.py --config RUN_DIR/nemo-config.yaml`

The config (rendered by `python -m launch.submit --backend nemo`) names a NeMo 2 recipe, dotted overrides
of its fields (shape, schedule, parallelism, checkpoints) and the dataset (our .bin/.idx prefix and tokenizer).

Stopping and requeueing follow the FSDP trainer's contract (training/signals.py): SIGUSR1 (SLURM's time-limit
warning, forwarded by the batch script) reaches NeMo's PreemptionCallback, which checkpoints at the end of the
step and stops; every rank then writes the exit-status file with EXIT_REQUEUE and the batch script requeues the job.
Anything that fails while the recipe is built (a bad override, a trainer setting Lightning refuses, an image
without NeMo) is a configuration error: EXIT_CONFIG_ERROR, never requeued. Lightning's own SLURM requeue is off:
it would call `scontrol`, which the container does not have.

NeMo is imported only in build_recipe() and the functions below it, so the override and exit logic is testable without
it; that logic is shared with bridge_pretrain.py in job_contract.py, this file's sibling (see there for the import).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__:  # imported as launch.jobs.nemo_pretrain (the tests)
    from . import job_contract
else:  # run by path in the container: sys.path[0] is launch/jobs, the repo's packages are not importable
    import job_contract  # type: ignore[import-not-found,no-redef]  # mypy checks the package import above

REQUIRED_KEYS = ("recipe", "name", "log_dir", "num_nodes", "gpus_per_node", "overrides", "data")


def load_config(path: str | Path) -> dict[str, Any]:
    return job_contract.load_config(path, REQUIRED_KEYS)


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
    job_contract.apply_overrides(recipe, config["overrides"], "recipe")
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
    recipe.trainer.callbacks = [
        *(recipe.trainer.callbacks or []),
        run.Config(PreemptionCallback, sig=job_contract.STOP_SIGNAL),
    ]
    recipe.trainer.strategy.cluster_environment = run.Config(SLURMEnvironment, auto_requeue=False)
    return recipe


def run_job(config_path: str, configure: job_contract.Configure) -> int:
    return job_contract.run_job(config_path, load_config, configure, "nemo_pretrain")


def _configure(config: dict[str, Any]) -> Callable[[], None]:
    import fiddle as fdl

    # Building constructs the trainer, its callbacks (ModelCheckpoint validates its triggers here), the strategy
    # and the data module: every setting the libraries refuse is refused now, before any GPU work.
    task = fdl.build(build_recipe(config))

    def train() -> None:
        task()
        if _preempted(task.keywords["trainer"]):
            raise job_contract.StoppedOnSignal()

    return train


def _preempted(trainer: Any) -> bool:
    from nemo.lightning.pytorch.callbacks import PreemptionCallback

    return any(isinstance(cb, PreemptionCallback) and cb.interrupted for cb in trainer.callbacks)


def main(argv: list[str] | None = None) -> int:
    # srun already started one process per GPU: the recipe runs in this process, no executor of its own.
    return run_job(
        job_contract.config_argument(argv, "NeMo 2 pretraining from a rendered recipe override file"), _configure
    )


if __name__ == "__main__":
    raise SystemExit(main())
