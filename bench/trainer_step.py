"""trainer_step_overhead: one optimizer step of our Trainer on CPU against a plain PyTorch loop, same model and batch.

Ours: `Trainer._train_step` as `run()` calls it - world size 1 (gloo), where the model is a plain module as in
torchtitan (no FSDP over one rank), batch pulled from an iterator, token count and batch checksum all-reduced, forward, summed cross-entropy, backward, loss/stop
all-reduce, loss guard, gradient norm and clipping, learning-rate schedule, AdamW step, zero_grad, and a metrics
record every step (log_every 1). Plain: the same ModelArgs built without FSDP, the same initialisation, AdamW
with the same hyperparameters, and forward, mean cross-entropy, backward, step, zero_grad on the same batch.
The figure is ours / plain step time (1.0 = no overhead).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import replace
from itertools import repeat
from pathlib import Path

import torch
import torch.nn.functional as F

from bench.profiling import own_time_difference, profiled
from bench.result import BenchResult, best_times, timed
from bench.training_setup import bench_trainer
from training.config import OptimSection
from training.models.args import ModelArgs
from training.models.transformer import build_model

# A small Llama-flavoured model: a CPU step of about a second on this machine, where compute dominates as on GPUs.
MODEL = {"name": "tiny", "vocab_size": "data", "dim": 256, "n_layers": 4, "n_heads": 4, "ffn_dim": 768}
DATA = {"seq_len": 256, "micro_batch_size": 2, "global_batch_size": 2}
WARMUP_STEPS = 3
ROUNDS = 12
# One intra-op thread: on a shared 2-core machine a second thread is often descheduled, and every parallel region
# then waits for it, which turns other people's load into seconds-long outliers on either side.
THREADS = 1
PROFILED_STEPS = 3
TARGET = "<= 1.1"


def _repeat(step: Callable[[], None], times: int) -> None:
    for _ in range(times):
        step()


def _plain_step(args: ModelArgs, optim: OptimSection, batch: dict[str, torch.Tensor]) -> Callable[[], None]:
    model = build_model(args, device="cpu")
    model.init_weights()
    optimizer = torch.optim.AdamW(
        model.parameters(),
        lr=optim.lr,
        betas=(optim.beta1, optim.beta2),
        eps=optim.eps,
        weight_decay=optim.weight_decay,
    )
    inputs, labels = batch["input_ids"], batch["labels"]

    def step() -> None:
        logits = model(inputs)
        loss = F.cross_entropy(logits.float().flatten(0, 1), labels.flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def trainer_step_benchmark(workdir: Path, data_prefix: Path) -> BenchResult:
    run_dir = workdir / "trainer-step-run"
    shutil.rmtree(run_dir, ignore_errors=True)
    threads = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    trainer = bench_trainer(run_dir, data_prefix, MODEL, DATA)
    batch = next(iter(trainer.train_loader))
    same_batch = repeat(batch)
    plain_step = _plain_step(trainer.model_args, trainer.config.optim, batch)

    def ours_step() -> None:
        trainer._train_step(same_batch)

    def ours() -> float:
        return timed(ours_step)

    def plain() -> float:
        return timed(plain_step)

    try:
        for _ in range(WARMUP_STEPS):
            ours()
            plain()
        best = best_times({"ours": ours, "plain": plain}, ROUNDS)
        ours_profile = profiled(lambda: _repeat(ours_step, PROFILED_STEPS))
        plain_profile = profiled(lambda: _repeat(plain_step, PROFILED_STEPS))
    finally:
        trainer.metrics.close()
        shutil.rmtree(run_dir, ignore_errors=True)
        torch.set_num_threads(threads)
    args = trainer.model_args
    overhead = best["ours"] / best["plain"]
    result = BenchResult(
        name="trainer_step_overhead",
        value=round(best["ours"], 4),
        unit="s/step",
        baseline_name="plain_pytorch_step_s",
        baseline_value=round(best["plain"], 4),
        ratio=round(overhead, 3),
        target=TARGET,
        note=(
            f"{trainer.params.total / 1e6:.1f} M-parameter Llama ({args.n_layers} x {args.dim}), micro-batch "
            f"{DATA['micro_batch_size']} x seq {DATA['seq_len']}, {THREADS} thread, fp32; "
            f"ratio = ours / plain; best of {ROUNDS} steps each, alternating, after {WARMUP_STEPS} warm-up steps"
        ),
        details=[
            METHOD,
            "",
            f"Best step: ours {best['ours'] * 1e3:.1f} ms, plain {best['plain'] * 1e3:.1f} ms "
            f"({(best['ours'] - best['plain']) * 1e3:+.1f} ms). cProfile of {PROFILED_STEPS} steps of each: the "
            "functions whose own time grew most from the plain loop to ours (torch's C++ ops and autograd's "
            "backward appear under their Python entry points):",
            "",
            *own_time_difference(ours_profile, plain_profile, PROFILED_STEPS, 12),
        ],
    )
    return result if result.holds else replace(result, details=[*result.details, "", *ANALYSIS])


METHOD = (
    "Ours: `Trainer._train_step` - next batch, token count and batch checksum all-reduced (gloo, world size 1), "
    "forward (one process: the model is a plain module, not FSDP-wrapped), summed cross-entropy scaled by the global token count, backward, "
    "loss and stop flag all-reduced, loss guard, global gradient norm and clipping to 1.0, learning-rate "
    "schedule, AdamW step, zero_grad, and a metrics record. Plain: the same shape built without FSDP, "
    "`torch.optim.AdamW` with the same hyperparameters, forward, mean cross-entropy, backward, step, zero_grad, "
    "on the same batch."
)
ANALYSIS = [
    "**Why the target does not hold in this run.** The table above is the difference. The trainer computes the "
    "global gradient norm and clips, fingerprints the batch, all-reduces twice and writes a metrics record: the "
    "features that make multi-node runs debuggable and exactly resumable, at a fixed cost per step that a "
    "5 M-parameter model on a CPU makes visible. Before 2026-11-21 the model was FSDP2-wrapped even at world "
    "size 1, and the ratio was 1.11-1.19: gathers, reduce-scatters and DTensor dispatch over one rank.",
]
