"""A LoRA fine-tuning step against a full fine-tuning step of our trainer on one GPU: the Llama 3.2 1B shape, seq
4096, bf16, eager; tokens/s and peak reserved memory of each, and their ratio, from one run of this script.

Both start from the same HF directory (written here from a fresh initialization: speed and memory do not depend on
the weights' values), train on the demo corpus with the same micro-batch and no checkpoint during the timed steps.
LoRA: rank 16, alpha 32, every Llama projection; the frozen base in bf16, adapters and their AdamW state in fp32.
Full: every parameter trains (fp32 master weights and AdamW state, bf16 compute). Throughput is the median over the
steps after --warmup; memory is the CUDA caching allocator's peak reserved bytes. Appends one dated row to --rows.

    python bench/gpu_finetune.py --steps 25 --warmup 8
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: the repository's packages
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.gpu_vs_torchtitan import _torchrun, append_row, git_commit, parse_our_metrics, prepare_data
from spec.cli import user_errors

REPO = Path(__file__).resolve().parents[1]
LORA: dict[str, Any] = {"rank": 16, "alpha": 32.0}
MODES = ("full", "lora")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=25, help="steps per run, warm-up included")
    parser.add_argument("--warmup", type=int, default=8, help="first steps left out of the median")
    parser.add_argument("--micro-batch", type=int, default=4)
    parser.add_argument("--seq-len", type=int, default=4096)
    parser.add_argument("--workdir", type=Path, default=REPO / "build" / "gpu-finetune")
    parser.add_argument("--rows", type=Path, default=REPO / "docs" / "benchmarks-gpu-finetune.jsonl")
    args = parser.parse_args(argv)
    for name in ("steps", "micro_batch", "seq_len"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')}: {getattr(args, name)} must be >= 1")
    if not 0 <= args.warmup < args.steps:
        parser.error(f"--warmup: {args.warmup} must be in [0, --steps {args.steps})")
    return args


def write_base(directory: Path) -> Path:
    """An HF directory (config.json, model.safetensors) of the 1b shape, freshly initialized."""
    import torch
    from safetensors.torch import save_file

    from training.models.hf import hf_config, to_hf_state_dict
    from training.models.registry import get_model_args
    from training.models.transformer import build_model

    args = get_model_args("1b")
    model = build_model(args, device="cpu")
    model.init_weights(seed=0)
    directory.mkdir(parents=True, exist_ok=True)
    state = {
        key: value.to(torch.bfloat16).contiguous() for key, value in to_hf_state_dict(args, model.state_dict()).items()
    }
    save_file(state, str(directory / "model.safetensors"))
    (directory / "config.json").write_text(json.dumps(hf_config(args)), encoding="utf-8")
    return directory


def job(args: argparse.Namespace, data_prefix: Path, base: Path, run_dir: Path, mode: str) -> dict[str, Any]:
    return {
        "model": {"hf_checkpoint": str(base)},
        "data": {
            "prefix": str(data_prefix),
            "seq_len": args.seq_len,
            "micro_batch_size": args.micro_batch,
            "global_batch_size": args.micro_batch,
        },
        "train": {"max_steps": args.steps, "log_every": 1, "eval_every": 0},
        "optim": {"lr": 1e-4, "warmup_steps": 2},
        "parallel": {"mixed_precision": "bf16", "compile": False, "activation_checkpoint": {"mode": "none"}},
        "checkpoint": {"every": "off", "dir": str(run_dir / "checkpoints")},
        "metrics": {"tensorboard": False, "plot": False},
        "finetune": {"mode": mode, **({"lora": LORA} if mode == "lora" else {})},
    }


def median_after(rows: list[tuple[int, float, float | None, float | None]], warmup: int) -> tuple[float, float | None]:
    timed = [row for row in rows if row[0] > warmup]
    if not timed:
        raise SystemExit(f"no step after --warmup {warmup}")
    memory = [row[3] for row in timed if row[3] is not None]
    return statistics.median(row[1] for row in timed), (max(memory) if memory else None)


@user_errors
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch
    import yaml

    if not torch.cuda.is_available():
        raise SystemExit("gpu_finetune: no CUDA device; run this on a GPU node")
    args.workdir.mkdir(parents=True, exist_ok=True)
    _, _, data_prefix = prepare_data(args.workdir)  # the demo BPE's ids fit the 128,256-entry table
    base = write_base(args.workdir / "base")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(":")}
    env.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    results: dict[str, dict[str, float | None]] = {}
    speed: dict[str, float] = {}
    peak: dict[str, float | None] = {}
    for mode in MODES:
        run_dir = args.workdir / mode
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.mkdir(parents=True)
        config = run_dir / "job.yaml"
        config.write_text(yaml.safe_dump(job(args, data_prefix, base, run_dir, mode)), encoding="utf-8")
        _torchrun(1, ["-m", "training.train", "--config", str(config), "--run-dir", str(run_dir)], env, run_dir / "log")
        tokens_per_s, memory = median_after(parse_our_metrics((run_dir / "metrics.jsonl").read_text()), args.warmup)
        results[mode] = {"tokens_per_s": round(tokens_per_s, 1), "peak_memory_gib": memory}
        speed[mode], peak[mode] = tokens_per_s, memory
        print(f"{mode:<5} {tokens_per_s:>10,.0f} tokens/s  peak {memory} GiB", flush=True)
    full_peak, lora_peak = peak["full"], peak["lora"]
    ratio = {
        "step_time_lora_over_full": round(speed["full"] / speed["lora"], 3),
        "memory_lora_over_full": round(lora_peak / full_peak, 3) if lora_peak and full_peak else None,
    }
    print(f"LoRA / full: step time {ratio['step_time_lora_over_full']}, memory {ratio['memory_lora_over_full']}")
    append_row(
        args.rows,
        {
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "gpu": torch.cuda.get_device_name(0),
            "commit": git_commit(),
            "torch": torch.__version__,
            "model": "1b",
            "micro_batch": args.micro_batch,
            "seq_len": args.seq_len,
            "steps": args.steps,
            "warmup": args.warmup,
            "lora": LORA,
            "results": results,
            "ratio": ratio,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
