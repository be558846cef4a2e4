"""Runs in .nemo-venv (NeMo 2.4.0, the nemo:25.07 container's version), never in the repo's venv:

    .nemo-venv/bin/python tests/launch/contracts/nemo_probe.py RUN_DIR/nemo-config.yaml [...] > report.json

For each rendered config it builds the recipe with launch/jobs/nemo_pretrain.py's own build_recipe (what the
job does in the container), then lets fiddle construct each part NeMo and Lightning would construct on the GPU
node: the logger with its ModelCheckpoint, the trainer's callbacks, the Megatron strategy, the optimizer and the
pre-training data module (reading our .bin/.idx and tokenizer). The Lightning Trainer itself refuses to start
without GPUs, so it is built last, through nemo_pretrain.run_job, to check how a start-up refusal is reported.
Prints one JSON report per config; every construction error is reported, not raised.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from entry_point import load_entry_point  # a sibling: the probes run by path


def _error(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"


def probe(job: Any, config_path: str) -> dict[str, Any]:
    import fiddle as fdl

    config = job.load_config(config_path)
    report: dict[str, Any] = {"config": config_path, "errors": {}}
    try:
        recipe = job.build_recipe(config)
    except Exception as error:  # reported to the test
        report["errors"]["recipe"] = _error(error)
        return report

    built: dict[str, Any] = {}
    parts = {
        "log": recipe.log,
        "callbacks": recipe.trainer.callbacks,
        "strategy": recipe.trainer.strategy,
        "optim": recipe.optim,
        "data": recipe.data,
    }
    for name, part in parts.items():
        try:
            built[name] = fdl.build(part)
        except Exception as error:  # reported, not raised
            report["errors"][name] = _error(error)

    if "log" in built and built["log"].ckpt is not None:
        ckpt = built["log"].ckpt
        report["checkpoint"] = {
            "every_n_train_steps": ckpt._every_n_train_steps,
            "train_time_interval": None if ckpt._train_time_interval is None else str(ckpt._train_time_interval),
            "save_top_k": ckpt.save_top_k,
        }
    if "callbacks" in built:
        report["callbacks"] = [type(cb).__name__ for cb in built["callbacks"]]
        report["preemption_signals"] = [int(cb.sig) for cb in built["callbacks"] if hasattr(cb, "sig")]
    if "strategy" in built:
        strategy = built["strategy"]
        environment = strategy.cluster_environment
        report["strategy"] = {
            "tensor": strategy.tensor_model_parallel_size,
            "pipeline": strategy.pipeline_model_parallel_size,
            "context": strategy.context_parallel_size,
            "expert": strategy.expert_model_parallel_size,
            "sequence_parallel": strategy.sequence_parallel,
            "environment": type(environment).__name__,
            "auto_requeue": getattr(environment, "auto_requeue", None),
        }
    if "data" in built:
        data = built["data"]
        report["data"] = {
            # NeMo checked that each prefix has its .bin and .idx (validate_dataset_asset_accessibility).
            "paths": data.build_kwargs["blend"][0],
            "weights": data.build_kwargs["blend"][1],  # None for one dataset, the mixture's weights otherwise
            "split": data.build_kwargs["split"],
            "seq_length": data.seq_length,
            "global_batch_size": data.global_batch_size,
            "micro_batch_size": data.micro_batch_size,
            "tokenizer_vocab": data.tokenizer.vocab_size,
        }
    if "optim" in built:
        optim = built["optim"]
        report["optim"] = {"lr": optim.config.lr, "min_lr": optim.config.min_lr, "clip_grad": optim.config.clip_grad}
    trainer = recipe.trainer
    report["trainer"] = {"num_nodes": trainer.num_nodes, "devices": trainer.devices, "max_steps": trainer.max_steps}
    model = recipe.model.config
    report["model"] = {"num_layers": model.num_layers, "hidden_size": model.hidden_size, "seq_length": model.seq_length}
    # GPTConfig.configure_model(tokenizer) builds the embedding and output layers with this vocab_size as set;
    # unset (None, Llama3Config8B's default), it pads the tokenizer's to make_vocab_size_divisible_by x TP instead.
    # (Building the config itself needs Transformer Engine for the recipe's rope fusion: read, not built.)
    report["vocab_size"] = model.vocab_size

    # The whole job start as the container runs it: on this CPU machine Lightning refuses accelerator='gpu'.
    report["run_job_exit"] = job.run_job(config_path, job._configure)
    status = Path(config["exit_status_file"]) if config.get("exit_status_file") else None
    report["exit_status"] = json.loads(status.read_text()) if status and status.exists() else None
    return report


def main(paths: list[str]) -> int:
    job = load_entry_point("nemo_pretrain")
    reports = [probe(job, path) for path in paths]
    print("NEMO-PROBE " + json.dumps(reports))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
