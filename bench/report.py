"""The results as a terminal table, docs/benchmarks.json and docs/benchmarks.md."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.machine import Machine
from bench.result import BenchResult

GPU_METHOD = """`bench/gpu_vs_torchtitan.py` trains the Llama 3.2 1B shape (128k embeddings, GQA 32/8, SwiGLU 8192) with
our trainer and with torchtitan (the PyPI wheel) on the same corpus and tokenizer, the same micro-batch
(`--micro-batch` x `--seq-len`, default 4 x 4096 per GPU), AdamW, bf16 compute over fp32 weights with fp32
reductions, the same activation checkpointing (`--ac none|selective`) and compile setting, each with and without
`torch.compile`. It prints tokens/s per GPU, MFU (recomputed for both with one formula and one peak, each
framework's own beside it), peak reserved memory and the final loss (the mean of the last 10 steps), and appends a
dated row (GPU, commit, torch, torchtitan release) to `docs/benchmarks-gpu.jsonl`, from which the table below is
made. Since ed62452 ours trains on torchtitan's schedule (lr 3e-4, 2 warm-up steps, cosine to 0 at the last step),
so the two sides' losses compare; before, ours warmed up over the 2,000 steps of `training/configs/1b.yaml`.
`--float8 tensorwise,rowwise` runs ours again, compiled, with each torchao FP8 recipe (docs/float8.md) on the same
samples; MFU stays against the bf16 peak, as torchtitan reports FP8 runs.

The torchtitan release is the newest the machine's torch runs (`bench/torchtitan_releases.py`; `--torchtitan`
names one): 0.3.0 needs torch 2.12 or later (it imports `torch.distributed.fsdp.DataParallelMeshDims` at
start-up); 0.2.2 runs on torch 2.10 and 2.11, which the lent GPU machines carry. What differs between the two:
- 0.3.0 refuses SDPA for language models and masks per document (`--attention flex|varlen`), and ties the
  embedding like our `1b`; ours is SDPA (cuDNN first), causal over the packed sequence.
- 0.2.2 runs SDPA with a causal mask, as ours does, but has no 1B flavor and no tied head:
  `bench/torchtitan_v0_2_spec.py` registers Llama 3's own train spec with the 1B shape added, and ours then runs
  untied (1,498,482,688 parameters on both sides; `tests/bench/test_torchtitan_v0_2.py` builds torchtitan's model
  through its own ConfigManager and counts them). On one GPU 0.2.2 does not shard: it autocasts to bf16 over fp32
  weights (its log: "Mixed precision training is handled by AMP"), where ours runs FSDP2 over the one rank with
  bf16 parameters. Each side keeps its own loss (ours chunked, 0.2.2 a full cross-entropy).

On a bare GPU machine (no internet), with the repository and `build/gpu-bench-wheels` (made here by
`make gpu-bench-wheels GPU_BENCH_PYTHON=3.12`, about 160 MB) copied over, one command:

```bash here long
python bench/gpu_vs_torchtitan.py --wheels build/gpu-bench-wheels --steps 50
```

It builds `build/gpu-bench/venv` over the machine's Python, sees the machine's torch and triton through a `.pth`
file, installs the chosen release and the trainer's other dependencies from the wheels (no index), and re-runs
itself there. A torch that runs no release is one line before any run; `--only ours` runs our side alone.
`tests/bench/test_torchtitan_config.py` loads `bench/torchtitan_config.py` through torchtitan 0.3.0's own
ConfigManager and reads the corpus directory with its `c4_test` loader (in `.torchtitan-venv`, built by
`make test`), so the torchtitan side cannot silently rot."""

GPU_ROWS_NAME = "benchmarks-gpu.jsonl"  # beside benchmarks.md; bench/gpu_vs_torchtitan.py --rows appends to it
GPU_NOT_RUN = "No row yet: no GPU figures here."


def read_gpu_rows(path: Path) -> list[dict[str, Any]]:
    """The rows bench/gpu_vs_torchtitan.py appended, oldest first; none when the file is not there."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _framework(row: dict[str, Any], result: dict[str, Any]) -> str:
    if result["framework"] == "torchtitan":
        return f"torchtitan {row['torchtitan']}"
    if row.get("tied_embeddings") is False:
        return "ours (untied)"
    return "ours"


def _gpu_result_row(row: dict[str, Any], result: dict[str, Any]) -> str:
    memory = result.get("peak_memory_gib")
    own = result.get("own_mfu")
    loss = result.get("final_loss")
    return (
        f"| {row['date'][:10]} | {row['gpu']} x{row['gpus']} | {row['commit']} | {row['torch']} | "
        f"{_framework(row, result)} | {result.get('precision', 'bf16')} | {str(result['compiled']).lower()} | "
        f"{result['tokens_per_s_per_gpu']:,.0f} | {result['mfu']:.1%} | {'-' if own is None else f'{own:.1%}'} | "
        f"{'-' if memory is None else f'{memory:.1f}'} | {'-' if loss is None else f'{loss:.4f}'} | "
        f"{result['steps_timed']} |"
    )


def fp8_comparisons(row: dict[str, Any]) -> list[str]:
    """Each FP8 result of a run against the same run's compiled bf16 result of ours: speed, memory, loss."""
    ours = [r for r in row["results"] if r["framework"] == "ours" and r["compiled"]]
    bf16 = [r for r in ours if r.get("precision", "bf16") == "bf16"]
    if not bf16:
        return []
    base = bf16[0]
    lines = []
    for result in ours:
        if result.get("precision", "bf16") == "bf16":
            continue
        speed = result["tokens_per_s_per_gpu"] / base["tokens_per_s_per_gpu"] - 1
        line = f"  - {result['precision']} against bf16, both compiled: {speed:+.1%} tokens/s"
        if result.get("peak_memory_gib") and base.get("peak_memory_gib"):
            line += f", {result['peak_memory_gib'] / base['peak_memory_gib'] - 1:+.1%} peak memory"
        if result.get("final_loss") is not None and base.get("final_loss") is not None:
            line += (
                f", final loss {result['final_loss']:.4f} against {base['final_loss']:.4f} "
                f"({result['final_loss'] - base['final_loss']:+.4f})"
            )
        lines.append(line + ".")
    return lines


def gpu_section(rows: Sequence[dict[str, Any]]) -> str:
    """The GPU comparison's section of docs/benchmarks.md: its method, then every recorded run's figures."""
    lines = ["## GPU: our trainer against torchtitan", "", GPU_METHOD, "", "### Runs", ""]
    if not rows:
        return "\n".join([*lines, GPU_NOT_RUN, ""])
    lines += [
        "| date | GPU | commit | torch | framework | precision | compile | tokens/s/GPU | MFU | own MFU | peak GiB "
        "| loss | steps timed |",
        "|---|---|---|---|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines += [_gpu_result_row(row, result) for result in row["results"]]
    lines.append("")
    for row in rows:
        frameworks = {result["framework"] for result in row["results"]}
        setting = (
            f"{row['micro_batch']} x {row['seq_len']} tokens per GPU, AC {row['ac']}, {row['steps']} steps "
            f"({row['warmup']} warm-up), peak {row['peak_flops'] / 1e12:.0f} TFLOP/s, "
            f"{row['flops_per_token'] / 1e9:.2f} GFLOP per token"
        )
        line = f"- {row['date'][:10]}, {row['gpu']}, commit {row['commit']}: {setting}."
        if row.get("how"):
            line += f" {row['how']}."
        if "torchtitan" not in frameworks:
            line += (
                " torchtitan did not run: " + str(row.get("torchtitan_skipped", "not asked for (--only ours)")) + "."
            )
        lines.append(line)
        lines += fp8_comparisons(row)
    return "\n".join(lines) + "\n"


def _number(value: float, unit: str) -> str:
    if unit.endswith("/s") and value >= 1e6:
        return f"{value / 1e6:,.1f} M{unit}"
    if unit == "s" or unit.startswith("s/"):
        return f"{value:,.3f} {unit}"
    return f"{value:,.0f} {unit}"


def _holds(result: BenchResult) -> str:
    return {True: "yes", False: "**no**", None: "-"}[result.holds]


def table_rows(results: Sequence[BenchResult]) -> list[list[str]]:
    rows = [["benchmark", "ours", "baseline", "baseline value", "ratio", "target", "holds"]]
    for r in results:
        rows.append(
            [
                r.name,
                _number(r.value, r.unit),
                r.baseline_name,
                _number(r.baseline_value, r.unit),
                f"{r.ratio:.3f}",
                r.target or "-",
                _holds(r),
            ]
        )
    return rows


def text_table(results: Sequence[BenchResult]) -> str:
    rows = table_rows(results)
    widths = [max(len(row[i].replace("**", "")) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for number, row in enumerate(rows):
        cells = [cell.replace("**", "").ljust(width) for cell, width in zip(row, widths, strict=True)]
        lines.append("  ".join(cells).rstrip())
        if number == 0:
            lines.append("  ".join("-" * width for width in widths))
    return "\n".join(lines)


def markdown_table(results: Sequence[BenchResult]) -> list[str]:
    rows = table_rows(results)
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "|".join("---" for _ in rows[0]) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows[1:]]
    return lines


def json_document(results: Sequence[BenchResult], machine: Machine, seconds: float) -> dict[str, object]:
    return {"machine": machine.as_dict(), "bench_seconds": round(seconds, 1), "results": [r.as_dict() for r in results]}


def markdown_document(
    results: Sequence[BenchResult],
    machine: Machine,
    seconds: float,
    intro: Sequence[str],
    gpu_rows: Sequence[dict[str, Any]] = (),
) -> str:
    lines = [
        "# Benchmarks",
        "",
        "Generated by `make bench` (`python -m bench`); edit bench/, not this file. Every figure is a ratio against",
        "a baseline measured in the same run, on the same machine, from the same data.",
        "",
        f"- Date: {machine.date}",
        f"- Machine: {machine.cpu_model}, {machine.cores} cores, {machine.memory_gib} GiB memory, {machine.os} "
        f"(kernel {machine.kernel})",
        f"- Software: Python {machine.python}, torch {machine.torch}, numpy {machine.numpy}",
        f"- Commit: {machine.commit}",
        f"- `make bench` took {seconds / 60:.1f} minutes ({seconds:.0f} s; the limit is 10 minutes).",
        "",
        *intro,
        "",
        "## Results",
        "",
        *markdown_table(results),
        "",
    ]
    for result in results:
        lines += [f"### {result.name}", "", f"{result.note}.", ""]
        if result.details:
            lines += [*result.details, ""]
    lines.append(gpu_section(gpu_rows))
    return "\n".join(lines).rstrip() + "\n"


def write_reports(
    results: Sequence[BenchResult], machine: Machine, seconds: float, json_path: Path, markdown_path: Path
) -> None:
    json_path.write_text(json.dumps(json_document(results, machine, seconds), indent=1) + "\n", encoding="utf-8")
    gpu_rows = read_gpu_rows(markdown_path.parent / GPU_ROWS_NAME)
    markdown_path.write_text(markdown_document(results, machine, seconds, INTRO, gpu_rows), encoding="utf-8")


INTRO = [
    "Each side is the best of several runs, and the two sides of a ratio run in turn (round by round), so that a",
    "slow period of the machine hits both. Targets that do not hold are explained under their figure, with the",
    "profile taken in the same run.",
    "",
    "This 2-core VM is noisy in a particular way: memory and disk blocks that were given back to the host cost a",
    "fault on the host at their next first touch, and the host caches the disk. Writing 1.5 GB and fsyncing it took",
    "1.7-3.5 s in one hour of 2026-11-24; reading the same 1.5 GB back took 0.32 s right after the host had seen",
    "those blocks and 0.6-2.7 s otherwise. Single runs of the loader figures moved by about 0.1 between runs the",
    "same hour.",
]
