"""`python -m training.evaluate`: score committed checkpoints of a run (or an HF directory) with lm-eval.

    python -m training.evaluate --run-dir RUN --tokenizer TOKENIZER.json --tasks-dir DIR --tasks a,b
        [--step N | --all | --every-steps S [--final]] [--batch-size B] [--device cpu|cuda] [--gpus G]
    python -m training.evaluate --run-dir RUN --hf-dir EXPORT --tasks-dir DIR --tasks a,b   # e.g. Bridge's export

Each checkpoint is exported once to RUN/export/step-N (training.export; renamed into place when complete) and
scored into RUN/eval/step-N/results.json (lm-eval's own results); a scored step is never scored again, so a
requeued or repeated job continues where it stopped. Then RUN/eval/scores.md, and scores.png with several steps.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import torch

from spec.cli import OneLineParser, user_errors
from spec.cli_types import existing_directory, existing_file
from training.checkpoint.errors import CheckpointError
from training.checkpoint.layout import complete_checkpoints
from training.checkpoint.ownership import NotOwnedError
from training.evaluate.errors import EvalError
from training.evaluate.harness import score, write_results
from training.evaluate.results import EVAL_DIR, evaluated_steps
from training.evaluate.scores import write_summary
from training.evaluate.task_files import check_tasks, render_tasks
from training.export import DTYPES, checkpoint_lora, export_checkpoint, find_checkpoint

EXPORT_DIR = "export"


def eos_token(tokenizer: Path) -> str | None:
    """The tokenizer's first special token: what training.prepare appends to every document."""
    try:
        added = json.loads(tokenizer.read_text(encoding="utf-8")).get("added_tokens", [])
    except (OSError, ValueError) as error:
        raise EvalError(f"--tokenizer: {tokenizer} is not a tokenizer.json: {error}") from None
    return next((token["content"] for token in added if token.get("special")), None)


def resolve_device(device: str, gpus: int) -> tuple[str, int]:
    """(device, GPUs to spread the model over): `auto` takes CUDA when the node has it and the CPU otherwise (one
    process, no device map), said in the log."""
    if device != "auto":
        return device, gpus
    if torch.cuda.is_available():
        return "cuda", min(gpus, torch.cuda.device_count())
    print("device: cpu (--device auto found no CUDA device on this node)", flush=True)
    return "cpu", 1


def export_for_eval(checkpoint: Path, step: int, run_dir: Path, tokenizer: Path) -> Path:
    """RUN/export/step-N as transformers loads it (config, weights, tokenizer); written beside, then renamed."""
    final = run_dir / EXPORT_DIR / f"step-{step}"
    if (final / "config.json").is_file():
        return final
    partial = final.with_name(final.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    # A LoRA run's checkpoint is scored as trained: its adapters merged into the base (the frozen base alone is what
    # the run started from)
    try:
        export_checkpoint(
            checkpoint, partial, torch.float32, tokenizer, merge_lora=checkpoint_lora(checkpoint) is not None
        )
    except NotOwnedError as refused:  # a checkpoint another user could have written is never read
        raise EvalError(str(refused)) from None
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": eos_token(tokenizer)}
    (partial / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    partial.rename(final)
    return final


def due_steps(
    checkpoints: list[tuple[int, Path]], every: int | None, all_: bool, final: bool
) -> list[tuple[int, Path]] | None:
    if all_:
        return checkpoints
    if every is not None:
        due = [(step, path) for step, path in checkpoints if step % every == 0]
        if final and checkpoints and checkpoints[-1] not in due:
            due.append(checkpoints[-1])
        return due
    return None  # one step: --step or the latest


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog="python -m training.evaluate", description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", required=True, type=existing_directory, help="the training run directory")
    parser.add_argument("--checkpoint-dir", type=existing_directory, help="checkpoint root if not RUN/checkpoints")
    parser.add_argument("--hf-dir", type=existing_directory, help="score this HF directory instead of a checkpoint")
    parser.add_argument("--tokenizer", type=existing_file, help="the run's tokenizer.json (checkpoints only)")
    parser.add_argument("--tasks-dir", required=True, type=existing_directory, help="task YAMLs and their data")
    parser.add_argument("--tasks", required=True, help="comma-separated task names from --tasks-dir")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--step", type=int, help="this committed step (default: the latest)")
    which.add_argument("--all", action="store_true", help="every committed step")
    which.add_argument("--every-steps", type=int, help="committed steps that are multiples of this")
    parser.add_argument("--final", action="store_true", help="with --every-steps: the latest step too")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument(
        "--device", default="cpu", help="cpu, cuda, cuda:N or auto (CUDA when the node has it, as the trainer does)"
    )
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32", help="what lm-eval loads the model in")
    parser.add_argument("--gpus", type=int, default=1, help="GPUs to spread the model over (one process)")
    parser.add_argument("--limit", type=int, help="score only this many documents per task (smoke tests)")
    return parser


@user_errors
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    run_dir = Path(args.run_dir).resolve()
    tasks = [task for task in args.tasks.split(",") if task]
    if not tasks:
        raise EvalError(f"--tasks: {args.tasks!r} names no task")
    for value, option in (
        (args.every_steps, "--every-steps"),
        (args.batch_size, "--batch-size"),
        (args.gpus, "--gpus"),
    ):
        if value is not None and value < 1:
            raise EvalError(f"{option}: {value} must be at least 1")
    device, gpus = resolve_device(args.device, args.gpus)
    tasks_dir = Path(args.tasks_dir).resolve()
    check_tasks(tasks_dir, tasks)
    include = render_tasks(tasks_dir, run_dir / EVAL_DIR / "tasks")

    def run(export: Path, label: str) -> None:
        results = score(
            export, include, tasks, batch_size=args.batch_size, device=device, dtype=args.dtype,
            gpus=gpus, limit=args.limit,
        )  # fmt: skip
        print(f"scored {export} -> {write_results(results, run_dir / EVAL_DIR / label)}", flush=True)

    if args.hf_dir:
        hf_dir = Path(args.hf_dir).resolve()
        run(hf_dir, hf_dir.name)
        return 0
    if args.tokenizer is None:
        raise EvalError("--tokenizer: needed to export a checkpoint (the run's tokenizer.json)")
    root = Path(args.checkpoint_dir) if args.checkpoint_dir else run_dir / "checkpoints"
    try:
        due = due_steps(complete_checkpoints(root), args.every_steps, args.all, args.final)
        if due is None:
            checkpoint = find_checkpoint(root, args.step)
            due = [(int(checkpoint.name.removeprefix("step-")), checkpoint)]
        elif not due and not args.every_steps:
            raise CheckpointError(f"--run-dir: no committed checkpoint under {root}")
    except CheckpointError as error:
        raise EvalError(str(error)) from None
    done = evaluated_steps(run_dir)
    for step, checkpoint in due:
        if step in done:
            continue
        try:
            export = export_for_eval(checkpoint, step, run_dir, Path(args.tokenizer))
        except (CheckpointError, FileNotFoundError) as error:  # pruned by the trainer while we read it
            print(f"skipped step {step}: {error}", file=sys.stderr)
            continue
        run(export, f"step-{step}")
    for path in write_summary(run_dir):
        print(f"wrote {path}")
    return 0
