"""lora_step_vs_full: one LoRA fine-tuning step of our Trainer against one full fine-tuning step, same run, same
model, start weights and batch, on CPU.

Both trainers start from the same HF directory (finetune.init), world size 1 (gloo), fp32 (the CPU default: the
frozen base stays fp32 there; with bf16 compute it is stored in bf16 and halves again). LoRA: rank 16, alpha 32,
every Llama projection. The time figure is LoRA / full step time; the memory figure is the training state each
holds (parameters + gradients + AdamW moments, counted from the tensors after a step: exact, where a CPU has no
allocator peak to read), LoRA / full.
"""

from __future__ import annotations

import json
import logging
import shutil
from itertools import repeat
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from bench.result import BenchResult, best_times, timed
from training.config import pad_vocab, parse_job_config
from training.data.manifest import manifest_path, read_manifest
from training.models.args import ModelArgs
from training.models.hf import hf_config, to_hf_state_dict
from training.models.transformer import build_model
from training.parallel.dist import init_distributed
from training.trainer import Trainer

MODEL: dict[str, Any] = {"dim": 256, "n_layers": 4, "n_heads": 4, "ffn_dim": 768}
DATA: dict[str, Any] = {"seq_len": 256, "micro_batch_size": 2, "global_batch_size": 2}
LORA = {"rank": 16, "alpha": 32.0}
WARMUP_STEPS, ROUNDS, THREADS = 3, 12, 1
TARGET = "<= 1.0"  # a LoRA step does less work (no base weight gradients, a small optimizer step)


def _base_checkpoint(directory: Path, vocab_size: int) -> Path:
    """An HF directory of the bench model's shape (weights as a fresh run draws them)."""
    args = ModelArgs(flavor="llama", vocab_size=vocab_size, max_seq_len=DATA["seq_len"], **MODEL)
    model = build_model(args, device="cpu")
    model.init_weights(seed=0)
    directory.mkdir(parents=True)
    tensors = {k: v.contiguous() for k, v in to_hf_state_dict(args, model.state_dict()).items()}
    save_file(tensors, str(directory / "model.safetensors"))
    (directory / "config.json").write_text(json.dumps(hf_config(args)), encoding="utf-8")
    return directory


def _trainer(run_dir: Path, data_prefix: Path, base: Path, finetune: dict[str, Any]) -> Trainer:
    job = {
        "model": {"hf_checkpoint": str(base)},
        "data": {"prefix": str(data_prefix), "validation_fraction": 0.01, **DATA},
        "train": {"max_steps": 1_000_000, "eval_every": 0, "log_every": 1},
        "optim": {"lr": 1e-4, "warmup_steps": 10},
        "checkpoint": {"every": "off"},
        "metrics": {"tensorboard": False, "plot": False, "peak_flops": 1e12, "prometheus_port": None},
        "finetune": finetune,
    }
    logging.getLogger("training").setLevel(logging.WARNING)
    return Trainer(parse_job_config(job, source="bench"), run_dir, init_distributed())


def state_bytes(trainer: Trainer) -> int:
    """Parameters, gradients and optimizer moments held after a step."""
    total = sum(p.numel() * p.element_size() for p in trainer.model.parameters())
    total += sum(p.grad.numel() * p.grad.element_size() for p in trainer.model.parameters() if p.grad is not None)
    for state in trainer.optimizer.state.values():
        total += sum(t.numel() * t.element_size() for t in state.values() if isinstance(t, torch.Tensor))
    return total


def lora_vs_full_benchmark(workdir: Path, data_prefix: Path) -> BenchResult:
    root = workdir / "finetune-step"
    vocab_size = pad_vocab(read_manifest(manifest_path(data_prefix)).vocab_size)
    shutil.rmtree(root, ignore_errors=True)
    threads = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    base = _base_checkpoint(root / "base", vocab_size)
    full = _trainer(root / "full", data_prefix, base, {"mode": "full"})
    lora = _trainer(root / "lora", data_prefix, base, {"mode": "lora", "lora": LORA})
    batch = repeat(next(iter(full.train_loader)))
    try:
        runs = {
            "lora": lambda: timed(lambda: lora._train_step(batch)),
            "full": lambda: timed(lambda: full._train_step(batch)),
        }
        for _ in range(WARMUP_STEPS):
            for run in runs.values():
                run()
        best = best_times(runs, ROUNDS)
        memory = {"lora": state_bytes(lora), "full": state_bytes(full)}
    finally:
        for trainer in (full, lora):
            trainer.metrics.close()
        shutil.rmtree(root, ignore_errors=True)
        torch.set_num_threads(threads)
    trainable = sum(p.numel() for p in lora.model.parameters() if p.requires_grad)
    return BenchResult(
        name="lora_step_vs_full",
        value=round(best["lora"], 4),
        unit="s/step",
        baseline_name="full_finetune_step_s",
        baseline_value=round(best["full"], 4),
        ratio=round(best["lora"] / best["full"], 3),
        target=TARGET,
        note=(
            f"{full.params.total / 1e6:.1f} M-parameter Llama, LoRA rank {LORA['rank']} on all 7 projections "
            f"({trainable / 1e6:.2f} M trainable); training state LoRA {memory['lora'] / 2**20:.0f} MiB vs full "
            f"{memory['full'] / 2**20:.0f} MiB ({memory['lora'] / memory['full']:.2f}); fp32, {THREADS} thread, "
            f"best of {ROUNDS} steps each, alternating"
        ),
        details=[__doc__.strip() if __doc__ else ""],
    )
