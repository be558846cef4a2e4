"""Our trainer against torchtitan on one GPU (or FSDP2 over --gpus of a node): Llama 3.2 1B shape, seq 4096, bf16,
each with and without torch.compile; tokens/s per GPU, MFU and peak memory side by side.

The torchtitan release is the newest one the machine's torch runs (bench/torchtitan_releases.py): 0.3.0 from torch
2.12, 0.2.2 on 2.10 and 2.11; --torchtitan names one. On a bare GPU machine with its own torch and no internet, one
command, with the wheels made here by `make gpu-bench-wheels` (GPU_BENCH_PYTHON=3.12 for the machine's Python)
copied alongside the repository; `--only ours` runs ours alone:

    python bench/gpu_vs_torchtitan.py --wheels build/gpu-bench-wheels --steps 50

It builds build/gpu-bench/venv over the machine's Python, sees the machine's torch (and triton) through a .pth file,
installs torchtitan and the trainer's few other dependencies from the wheels without an index, and re-runs itself
there. Where torchtitan is already installed, leave out --wheels.

Both sides get the same corpus (the demo corpus, tokenized by a BPE that `training.prepare` trains; its ids fit the
128,256-entry embedding both models keep), the same micro-batch of --micro-batch x --seq-len tokens per GPU, AdamW,
bf16 parameters with fp32 reductions, the same activation checkpointing (--ac) and compile setting, and no checkpoint
during the timed steps. Where the releases differ: torchtitan 0.3.0 refuses SDPA for language models (flex or varlen,
per-document masks: --attention) and ties the embedding like ours; 0.2.2 runs SDPA with a causal mask, as ours does,
but has no 1B flavor and no tied head, so bench/torchtitan_v0_2_spec.py adds the shape and ours runs untied. Each
side's loss is its own (ours chunked, torchtitan's full cross-entropy). On one GPU torchtitan 0.2.2 does not shard
(it autocasts to bf16 over fp32 weights); ours runs FSDP2 over the one rank with bf16 parameters. Throughput
is the median over the steps after --warmup. MFU is recomputed for both with one formula (6 N + 12 l h s per token,
N the matmul parameters, causal mask not discounted) and one peak (--peak-tflops, default: the GPU's dense bf16
figure from spec/platform/instances.py); each framework's own MFU is printed beside it. Peak memory is the CUDA caching
allocator's peak reserved bytes on both sides. Every run appends one dated row (device, commit, torch) to --rows.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import sysconfig
from dataclasses import asdict, dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

if __package__ in (None, ""):  # run as a file (python bench/gpu_vs_torchtitan.py): the repository's packages
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.torchtitan_releases import (
    RELEASES,
    TorchtitanRelease,
    newest_release_for,
    release_named,
    release_problem,
)
from bench.torchtitan_v0_2_job import TorchtitanV02Job, job_toml

REPO = Path(__file__).resolve().parents[1]
TORCHTITAN_MODULE = "bench.torchtitan_config"
TORCHTITAN_WARMUP_STEPS = 2
# torchtitan's per-step log line (rank 0, components/metrics.py of 0.3.0 and 0.2.2):
# "step: 12  loss: ...  grad_norm: ...  memory: 30.10GiB(38.00%)  tps: 45,678  tflops: ...  mfu: 41.23%".
_TORCHTITAN_STEP = re.compile(r"step:\s*(\d+)\b.*?memory:\s*([\d.]+)GiB.*?tps:\s*([\d,]+).*?mfu:\s*([\d.]+|N/A)%?")
StepRow = tuple[int, float, float | None, float | None]  # step, tokens/s per GPU, MFU, peak GiB
_TORCHTITAN_LOSS = re.compile(r"step:\s*(\d+)\b.*?loss:\s*([\d.]+)")
LOSS_STEPS = 10  # the final loss is the mean of the last this-many steps: FP8 against bf16 on the same samples


@dataclass(frozen=True)
class RunResult:
    framework: str
    compiled: bool
    steps_timed: int
    tokens_per_s_per_gpu: float
    mfu: float  # recomputed here, same formula and peak for both
    own_mfu: float | None  # as the framework reports it
    peak_memory_gib: float | None  # peak reserved by the CUDA caching allocator, highest over the timed steps
    precision: str = "bf16"  # or "fp8-<torchao recipe>" (ours with --float8)
    final_loss: float | None = None  # mean training loss of the last LOSS_STEPS steps (each side its own loss)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def parse_torchtitan_log(text: str) -> list[StepRow]:
    """(step, tokens/s per GPU, MFU as a fraction or None, peak reserved GiB) of every step line in torchtitan's log."""
    found: list[StepRow] = []
    for line in text.splitlines():
        match = _TORCHTITAN_STEP.search(line)
        if match:
            mfu = None if match.group(4) == "N/A" else float(match.group(4)) / 100
            found.append((int(match.group(1)), float(match.group(3).replace(",", "")), mfu, float(match.group(2))))
    return found


def torchtitan_losses(text: str) -> dict[int, float]:
    """Step -> training loss from torchtitan's step lines."""
    return {int(m.group(1)): float(m.group(2)) for m in map(_TORCHTITAN_LOSS.search, text.splitlines()) if m}


def our_losses(text: str) -> dict[int, float]:
    """Step -> training loss from our metrics.jsonl."""
    records = (json.loads(line) for line in text.splitlines() if line.strip())
    return {int(r["step"]): float(r["loss"]) for r in records if r.get("kind") == "train"}


def final_loss(losses: dict[int, float]) -> float | None:
    """Mean loss of the last LOSS_STEPS steps; None when there are none."""
    last = [losses[step] for step in sorted(losses)[-LOSS_STEPS:]]
    return round(statistics.fmean(last), 4) if last else None


def parse_our_metrics(text: str) -> list[StepRow]:
    """(step, tokens/s per GPU, MFU, peak reserved GiB) of every train record in our metrics.jsonl."""
    found = []
    for line in text.splitlines():
        record = json.loads(line)
        if record.get("kind") == "train":
            mfu = record.get("mfu")
            reserved = record.get("mem_reserved_gib")
            found.append(
                (
                    int(record["step"]),
                    float(record["tokens_per_s"]),
                    mfu if isinstance(mfu, float) else None,
                    reserved if isinstance(reserved, float) else None,
                )
            )
    return found


def summarize(
    framework: str, compiled: bool, steps: list[StepRow], warmup: int, flops_per_token: float, peak_flops: float
) -> RunResult:
    """Median over the steps after `warmup`; a run with none left is a one-line error."""
    timed = [row for row in steps if row[0] > warmup]
    if not timed:
        raise ValueError(f"{framework} (compile={compiled}): no step after --warmup {warmup} in its log")
    tokens_per_s = statistics.median(row[1] for row in timed)
    own = [row[2] for row in timed if row[2] is not None]
    memory = [row[3] for row in timed if row[3] is not None]
    return RunResult(
        framework=framework,
        compiled=compiled,
        steps_timed=len(timed),
        tokens_per_s_per_gpu=round(tokens_per_s, 1),
        mfu=round(flops_per_token * tokens_per_s / peak_flops, 4),
        own_mfu=round(statistics.median(own), 4) if own else None,
        peak_memory_gib=round(max(memory), 2) if memory else None,
    )


def render_table(results: list[RunResult]) -> str:
    header = (
        f"{'framework':<11} {'precision':<14} {'compile':<8} {'tokens/s/GPU':>13} {'MFU':>7} {'own MFU':>8} "
        f"{'peak GiB':>9} {'loss':>7} {'steps':>6}"
    )
    lines = [header, "-" * len(header)]
    for r in results:
        own = f"{r.own_mfu:.1%}" if r.own_mfu is not None else "-"
        memory = f"{r.peak_memory_gib:.1f}" if r.peak_memory_gib is not None else "-"
        loss = f"{r.final_loss:.4f}" if r.final_loss is not None else "-"
        lines.append(
            f"{r.framework:<11} {r.precision:<14} {str(r.compiled).lower():<8} {r.tokens_per_s_per_gpu:>13,.0f} "
            f"{r.mfu:>7.1%} {own:>8} {memory:>9} {loss:>7} {r.steps_timed:>6}"
        )
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=1, help="GPUs on this node to use (FSDP2 over them from 2)")
    parser.add_argument("--steps", type=int, default=50, help="steps per run, warm-up included")
    parser.add_argument("--warmup", type=int, default=10, help="first steps left out of the median")
    parser.add_argument("--micro-batch", type=int, default=4, help="sequences per GPU per step")
    parser.add_argument("--seq-len", type=int, default=4096)
    parser.add_argument("--peak-tflops", type=float, help="dense bf16 peak per GPU (default: from the GPU's name)")
    parser.add_argument("--ac", choices=("none", "selective"), default="none", help="activation checkpointing, both")
    parser.add_argument("--attention", choices=("flex", "varlen"), default="flex", help="torchtitan's attention")
    parser.add_argument("--workdir", type=Path, default=REPO / "build" / "gpu-bench")
    parser.add_argument("--output", type=Path, help="write the results here as JSON")
    parser.add_argument("--rows", type=Path, default=REPO / "docs" / "benchmarks-gpu.jsonl", help="append a dated row")
    parser.add_argument("--only", choices=("ours", "torchtitan"), help="run one framework only")
    parser.add_argument(
        "--compile", choices=("both", "true", "false"), default="both", help="eager, compiled or both (bf16 runs)"
    )
    parser.add_argument(
        "--torchtitan",
        choices=[release.version for release in RELEASES],
        help="torchtitan release to compare with (default: the newest this machine's torch runs)",
    )
    parser.add_argument(
        "--float8",
        default="",
        help="comma-separated torchao recipes (tensorwise, rowwise, mxfp8): ours again with each, compiled (MFU "
        "stays against the bf16 peak, as torchtitan reports it)",
    )
    parser.add_argument("--wheels", type=Path, help="bootstrap a venv from these wheels first (a bare GPU machine)")
    args = parser.parse_args(argv)
    for name in ("gpus", "steps", "micro_batch", "seq_len"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')}: {getattr(args, name)} must be >= 1")
    if not 0 <= args.warmup < args.steps:
        parser.error(f"--warmup: {args.warmup} must be in [0, --steps {args.steps})")
    from training.quantization.config import FLOAT8_RECIPES

    args.float8 = [recipe for recipe in args.float8.split(",") if recipe]
    unknown = [recipe for recipe in args.float8 if recipe not in FLOAT8_RECIPES]
    if unknown:
        parser.error(f"--float8: {unknown[0]!r} is not a torchao recipe ({', '.join(FLOAT8_RECIPES)})")
    return args


def choose_release(wanted: str | None, torch_version: str, fsdp_module: object) -> TorchtitanRelease:
    """--torchtitan's release if this torch runs it, else the newest it runs; one line when none fits."""
    if wanted is not None:
        release = release_named(wanted)
        problem = release_problem(release, torch_version, fsdp_module)
        if problem is not None:
            raise SystemExit(f"{problem}; leave out --torchtitan to take the newest release it runs, or --only ours")
        return release
    newest = newest_release_for(torch_version, fsdp_module)
    if newest is None:
        known = ", ".join(release.version for release in RELEASES)
        raise SystemExit(f"torch: {torch_version} runs none of the torchtitan releases {known}; use --only ours")
    return newest


def machine_release(wanted: str | None) -> TorchtitanRelease:
    import torch
    import torch.distributed.fsdp

    return choose_release(wanted, torch.__version__, torch.distributed.fsdp)


def preflight(args: argparse.Namespace, release: TorchtitanRelease) -> float:
    """Check the GPUs and torchtitan; return the peak FLOP/s per GPU."""
    import torch

    from training.metrics.flops import gpu_peak_flops

    major, minor = (int(part) for part in torch.__version__.split(".")[:2])
    if (major, minor) < (2, 11):
        raise SystemExit(f"torch: {torch.__version__} is older than 2.11, which this comparison needs")
    if not torch.cuda.is_available():
        raise SystemExit("gpu_vs_torchtitan: no CUDA device; run this on a GPU node")
    if torch.cuda.device_count() < args.gpus:
        raise SystemExit(f"--gpus: {args.gpus} but this node has {torch.cuda.device_count()} CUDA devices")
    if args.only != "ours":
        try:
            found = version("torchtitan")
        except PackageNotFoundError:
            raise SystemExit(f"torchtitan: not installed; pip install torchtitan=={release.version}") from None
        if found != release.version:
            raise SystemExit(
                f"torchtitan: {found} installed, but torch {torch.__version__} takes {release.version} here "
                f"(--torchtitan {found} to insist)"
            )
    if args.peak_tflops is not None:
        return args.peak_tflops * 1e12
    name = torch.cuda.get_device_name(0)
    found_peak = gpu_peak_flops(name)
    if found_peak is None:
        raise SystemExit(f"--peak-tflops: no dense bf16 peak known for {name!r}; give it")
    return found_peak[0]


def torchtitan_corpus_dir(corpus: Path, directory: Path) -> Path:
    """A directory holding the corpus as train.jsonl: what torchtitan's "c4_test" loader reads as dataset_path
    (datasets.load_dataset(directory, split="train"); each line's "text")."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(corpus, directory / "train.jsonl")
    return directory


def torchtitan_env(
    *,
    corpus_dir: Path,
    tokenizer_dir: Path,
    dump_folder: Path,
    seq_len: int,
    micro_batch: int,
    steps: int,
    ac: str,
    attention: str,
) -> dict[str, str]:
    """The BENCH_TT_* settings bench/torchtitan_config.py reads."""
    return {
        "BENCH_TT_CORPUS_DIR": str(corpus_dir),
        "BENCH_TT_TOKENIZER_DIR": str(tokenizer_dir),
        "BENCH_TT_DUMP_FOLDER": str(dump_folder),
        "BENCH_TT_SEQ_LEN": str(seq_len),
        "BENCH_TT_MICRO_BATCH": str(micro_batch),
        "BENCH_TT_STEPS": str(steps),
        "BENCH_TT_AC": ac,
        "BENCH_TT_ATTENTION": attention,
    }


def prepare_data(workdir: Path) -> tuple[Path, Path, Path]:
    """(torchtitan's corpus directory, tokenizer directory with tokenizer.json, our data prefix)."""
    from training.corpus import demo_corpus_path
    from training.prepare import prepare_dataset

    corpus = demo_corpus_path(workdir / "corpus")
    prepared = prepare_dataset([corpus], workdir / "data" / "demo", show_progress=False)
    tokenizer_dir = workdir / "tokenizer"
    tokenizer_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(prepared.tokenizer_path, tokenizer_dir / "tokenizer.json")
    return torchtitan_corpus_dir(corpus, workdir / "torchtitan-corpus"), tokenizer_dir, prepared.data_prefix


def _torchrun(gpus: int, module_args: list[str], env: dict[str, str], log: Path) -> str:
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={gpus}"]
    command += ["--local-ranks-filter", "0", *module_args]
    with log.open("w", encoding="utf-8") as out:
        completed = subprocess.run(command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
    text = log.read_text(encoding="utf-8", errors="replace")
    if completed.returncode != 0:
        tail = "\n".join(text.splitlines()[-15:])
        raise SystemExit(f"{' '.join(module_args[:2])} failed (exit {completed.returncode}), log {log}:\n{tail}")
    return text


def run_ours(
    args: argparse.Namespace,
    data_prefix: Path,
    compiled: bool,
    env: dict[str, str],
    release: TorchtitanRelease,
    float8: str = "off",
) -> str:
    import yaml

    precision = "bf16" if float8 == "off" else f"fp8-{float8}"
    run_dir = args.workdir / f"ours-{precision}-compile-{str(compiled).lower()}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    job = yaml.safe_load((REPO / "training" / "configs" / "1b.yaml").read_text(encoding="utf-8"))
    job["data"].update(
        prefix=str(data_prefix),
        seq_len=args.seq_len,
        micro_batch_size=args.micro_batch,
        global_batch_size=args.micro_batch * args.gpus,  # one micro-batch per GPU per step, like torchtitan's
    )
    job["model"]["tie_embeddings"] = release.tied_embeddings  # the model torchtitan's release trains
    job["train"].update(max_steps=args.steps, log_every=1, eval_every=0)
    # torchtitan's schedule in both releases' jobs (bench/torchtitan_v0_2_job.py, bench/torchtitan_config.py): lr 3e-4,
    # 2 warm-up steps, cosine to 0 at the last step; so the losses of the two sides, and of bf16 and FP8, compare.
    job["optim"].update(lr=3e-4, warmup_steps=TORCHTITAN_WARMUP_STEPS, decay_steps=args.steps, min_lr_ratio=0.0)
    job["parallel"]["compile"] = compiled
    job["parallel"]["activation_checkpoint"] = {"mode": args.ac}
    job["checkpoint"] = {"every": "off", "dir": str(run_dir / "checkpoints")}
    job["metrics"] = {"tensorboard": False, "plot": False}
    job.pop("profile", None)
    job["float8"] = {"recipe": float8}
    config = run_dir / "job.yaml"
    config.write_text(yaml.safe_dump(job), encoding="utf-8")
    try:
        _torchrun(
            args.gpus,
            ["-m", "training.train", "--config", str(config), "--run-dir", str(run_dir)],
            env,
            run_dir / "log",
        )
    finally:  # the end-of-run checkpoint (18 GB for 1B) is not measured: runs after it would fill the disk
        shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)
    return (run_dir / "metrics.jsonl").read_text(encoding="utf-8")


def run_torchtitan(
    args: argparse.Namespace,
    corpus_dir: Path,
    tokenizer_dir: Path,
    compiled: bool,
    env: dict[str, str],
    release: TorchtitanRelease,
) -> str:
    run_dir = args.workdir / f"torchtitan-compile-{str(compiled).lower()}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    offline = {**env, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    # The run's shape, the same for every release: each takes it in its own form (a TOML job, or environment
    # variables its Python config registry reads)
    shape = {
        "corpus_dir": corpus_dir,
        "tokenizer_dir": tokenizer_dir,
        "dump_folder": run_dir,
        "seq_len": args.seq_len,
        "micro_batch": args.micro_batch,
        "steps": args.steps,
        "ac": args.ac,
    }
    if release.config_style == "toml":
        config_file = run_dir / "job.toml"
        config_file.write_text(job_toml(TorchtitanV02Job(**shape, compiled=compiled)), encoding="utf-8")
        return _torchrun(
            args.gpus, ["-m", "torchtitan.train", "--job.config_file", str(config_file)], offline, run_dir / "log"
        )
    tt_env = {**offline, **torchtitan_env(**shape, attention=args.attention)}
    config = "llama3_1b_bench_compile" if compiled else "llama3_1b_bench"
    module_args = ["-m", "torchtitan.train", "--module", TORCHTITAN_MODULE, "--config", config]
    return _torchrun(args.gpus, module_args, tt_env, run_dir / "log")


def bootstrap_venv(wheels: Path, venv: Path, requirements: Path) -> Path:
    """A venv over this interpreter that sees its packages (the machine's torch and triton) through a .pth file
    and gets torchtitan and the trainer's other dependencies from `wheels`, with no index. Returns its python."""
    if not wheels.is_dir():
        raise SystemExit(f"--wheels: {str(wheels)!r} is not a directory (make gpu-bench-wheels writes one)")
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        site = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip
        here = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
        Path(site, "machine_site.pth").write_text("\n".join(sorted(here)) + "\n", encoding="utf-8")
    command = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-index"]
    command += ["--find-links", str(wheels), "--no-deps", "-r", str(requirements)]
    subprocess.run(command, check=True)
    return python


def git_commit() -> str:
    found = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    return found.stdout.strip() if found.returncode == 0 else "unknown"


def append_row(path: Path, row: dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(row) + "\n")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.wheels is not None:
        release = machine_release(args.torchtitan)
        python = bootstrap_venv(args.wheels, args.workdir / "venv", release.requirements)
        rest = list(sys.argv[1:] if argv is None else argv)
        index = rest.index("--wheels")
        del rest[index : index + 2]
        os.execv(str(python), [str(python), str(Path(__file__).resolve()), *rest])
    release = machine_release(args.torchtitan)
    peak = preflight(args, release)
    import dataclasses

    from training.metrics.flops import model_flops_per_token
    from training.models.registry import get_model_args

    model_args = dataclasses.replace(get_model_args("1b"), tie_embeddings=release.tied_embeddings)
    flops_per_token = model_flops_per_token(model_args, args.seq_len)
    args.workdir.mkdir(parents=True, exist_ok=True)
    corpus_dir, tokenizer_dir, data_prefix = prepare_data(args.workdir)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    }
    env.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    results = []
    for compiled in {"both": (False, True), "true": (True,), "false": (False,)}[args.compile]:
        if args.only != "torchtitan":
            text = run_ours(args, data_prefix, compiled, env, release)
            result = summarize("ours", compiled, parse_our_metrics(text), args.warmup, flops_per_token, peak)
            results.append(dataclasses.replace(result, final_loss=final_loss(our_losses(text))))
        if args.only != "ours":
            log = run_torchtitan(args, corpus_dir, tokenizer_dir, compiled, env, release)
            result = summarize("torchtitan", compiled, parse_torchtitan_log(log), args.warmup, flops_per_token, peak)
            results.append(dataclasses.replace(result, final_loss=final_loss(torchtitan_losses(log))))
        print(render_table(results), flush=True)
    # torchao's FP8 is made for torch.compile (eager, each cast is its own kernel): compiled runs only.
    for recipe in args.float8 if args.only != "torchtitan" else []:
        text = run_ours(args, data_prefix, True, env, release, float8=recipe)
        result = summarize("ours", True, parse_our_metrics(text), args.warmup, flops_per_token, peak)
        results.append(dataclasses.replace(result, precision=f"fp8-{recipe}", final_loss=final_loss(our_losses(text))))
        print(render_table(results), flush=True)
    print(
        f"\nMFU: 6 N + 12 l h s = {flops_per_token / 1e9:.2f} GFLOP per token, peak {peak / 1e12:.0f} TFLOP/s per GPU"
    )
    import torch

    document = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "gpu": torch.cuda.get_device_name(0),
        "gpus": args.gpus,
        "commit": git_commit(),
        "torch": torch.__version__,
        "torchtitan": release.version,
        "tied_embeddings": release.tied_embeddings,
        "micro_batch": args.micro_batch,
        "seq_len": args.seq_len,
        "ac": args.ac,
        "torchtitan_attention": args.attention if release.config_style == "registry" else "sdpa",
        "steps": args.steps,
        "warmup": args.warmup,
        "float8": args.float8,
        "compile": args.compile,
        "loss_steps": LOSS_STEPS,
        "flops_per_token": flops_per_token,
        "peak_flops": peak,
        "results": [r.as_dict() for r in results],
    }
    if args.only == "ours":
        document["torchtitan_skipped"] = "--only ours"
    append_row(args.rows, document)
    if args.output is not None:
        args.output.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
