"""Helpers for tests that run the trainer: tiny job configs, launching (in process, python, torchrun), records."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from tests.waiting import wait_until
from training.corpus import demo_corpus_path
from training.prepare import prepare_dataset

REPO_ROOT = Path(__file__).resolve().parents[2]
DEMO_DOCUMENTS = 100


def prepare_demo_subset(directory: Path, documents: int = DEMO_DOCUMENTS) -> str:
    lines = demo_corpus_path().read_text(encoding="utf-8").splitlines()[:documents]
    subset = directory / "demo-subset.jsonl"
    subset.write_text("\n".join(lines) + "\n", encoding="utf-8")
    prepared = prepare_dataset([subset], directory / "demo", vocab_size_to_train=512, workers=1, show_progress=False)
    return str(prepared.data_prefix)


def prepare_second_source(data_prefix: str, first: int = DEMO_DOCUMENTS, documents: int = 60) -> str:
    """Another dataset beside `data_prefix` (the next demo documents) with its tokenizer: a mixture's second source."""
    directory = Path(data_prefix).parent
    lines = demo_corpus_path().read_text(encoding="utf-8").splitlines()[first : first + documents]
    source = directory / "second-source.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tokenizer = directory / "demo_tokenizer.json"
    prepared = prepare_dataset([source], directory / "second", tokenizer_path=tokenizer, workers=1, show_progress=False)
    return str(prepared.data_prefix)


def tiny_job(data_prefix: str, **sections: dict[str, Any]) -> dict[str, Any]:
    """A job small enough for CI: 2 x 64 Llama blocks, 64-token samples, global batch 8; sections merge in."""
    job: dict[str, Any] = {
        "model": {"name": "tiny", "vocab_size": "data", "n_layers": 2, "dim": 64, "n_heads": 4, "ffn_dim": 192},
        "data": {
            "prefix": data_prefix,
            "seq_len": 64,
            "micro_batch_size": 4,
            "global_batch_size": 8,
            "validation_fraction": 0.05,
            "prefetch": 2,
        },
        "train": {"max_steps": 10, "eval_every": 0, "eval_batches": 2},
        "optim": {"lr": 3e-3, "warmup_steps": 4},
        "checkpoint": {"every": 4, "keep_last": 2},
        "metrics": {"tensorboard": False, "plot": False, "peak_flops": 1e11},
    }
    for section, values in sections.items():
        job[section] = {**job.get(section, {}), **values}
    return job


def write_job(path: Path, job: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(job), encoding="utf-8")
    return path


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = "1"  # two ranks on two shared cores: oversubscribed threads crawl
    env["PYTHONPATH"] = str(REPO_ROOT)
    return env


def train_command(config: Path, run_dir: Path, ranks: int, *extra: str) -> list[str]:
    module = ["-m", "training.train", "--config", str(config), "--run-dir", str(run_dir), *extra]
    if ranks == 1:
        return [sys.executable, *module]
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}"]
    return [*torchrun, "--max-restarts=0", *module]


def run_training(
    config: Path, run_dir: Path, ranks: int, *extra: str, timeout: float = 600
) -> subprocess.CompletedProcess:
    return subprocess.run(
        train_command(config, run_dir, ranks, *extra),
        cwd=REPO_ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def start_training(config: Path, run_dir: Path, ranks: int, *extra: str) -> subprocess.Popen:
    """Started in its own session so the launcher and its workers can be signalled as one group."""
    return subprocess.Popen(
        train_command(config, run_dir, ranks, *extra),
        cwd=REPO_ROOT,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of a process group, from /proc."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone while we looked
            continue
        # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses, so split after its last ')'.
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def _descendants(pid: int) -> list[int]:
    """Live processes below `pid`, from /proc (found before a kill: killed parents hand children to init)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parents[int(entry.name)] = int(fields[1])
    found, frontier = [], [pid]
    while frontier:
        children = [child for child, parent in parents.items() if parent in frontier]
        found.extend(children)
        frontier = children
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def kill_training(process: subprocess.Popen) -> None:
    """SIGKILL the launcher and every worker and wait until none of them runs any more: a worker still finishing a
    write when the launcher was reaped renamed a checkpoint file under a test's copytree. torchrun may start its
    workers in sessions of their own (torch 2.13 does), so the workers are found as the launcher's descendants as
    well as its process group."""
    workers = _descendants(process.pid)
    os.killpg(process.pid, signal.SIGKILL)
    for pid in workers:
        with contextlib.suppress(ProcessLookupError):  # gone with the group
            os.kill(pid, signal.SIGKILL)
    process.wait()
    wait_until(lambda: not _group_members(process.pid), f"every process of group {process.pid} to exit")
    wait_until(lambda: not [pid for pid in workers if _alive(pid)], f"the workers of launcher {process.pid} to exit")


def records(run_dir: Path, kind: str | None = None) -> list[dict[str, Any]]:
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:  # a line being written right now
            continue
        if kind is None or record.get("kind") == kind:
            out.append(record)
    return out


def wait_for_step(run_dir: Path, step: int, process: subprocess.Popen, timeout: float = 600) -> int:
    """Poll metrics.jsonl until a train record at >= step appears; returns the step seen."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        logged = [r["step"] for r in records(run_dir, "train")]
        if logged and max(logged) >= step:
            return max(logged)
        if process.poll() is not None:
            output = process.stdout.read() if process.stdout else ""
            raise AssertionError(f"training exited with {process.returncode} before step {step}:\n{output[-3000:]}")
        time.sleep(0.02)
    raise AssertionError(f"no step {step} within {timeout}s")


def losses_by_step(run_dir: Path, after: int = 0) -> dict[int, float]:
    """The last logged loss per step (a resumed run logs again the steps after its checkpoint)."""
    return {r["step"]: r["loss"] for r in records(run_dir, "train") if r["step"] > after}


def killed_run_and_copy(config: Path, run_dir: Path, max_steps: int, kill_after: int = 6) -> tuple[Path, Path]:
    """(run dir, untouched copy) of `config` on 2 ranks, SIGKILLed (launcher and workers) after step `kill_after`;
    the copy lets each resume test start from the same killed state."""
    process = start_training(config, run_dir, ranks=2)
    try:
        wait_for_step(run_dir, kill_after, process)
    finally:
        kill_training(process)
    assert max(r["step"] for r in records(run_dir, "train")) < max_steps, "the run finished before it was killed"
    copy = run_dir.with_name("copy")
    shutil.copytree(run_dir, copy)
    return run_dir, copy
