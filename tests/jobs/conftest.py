"""Fixtures for the job tests: a real prepared dataset, a tiny job config, and tool recorders."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from training.corpus import demo_corpus_path
from training.prepare import prepare_dataset

REPO = Path(__file__).resolve().parents[2]

# A recorder stands in for a tool this host lacks (the pyxis srun, neuron_parallel_compile, Neuron's torchrun,
# neuron-ls): it appends its name, argv, working directory and the job-relevant environment to $RECORD_LOG.
RECORDER = """#!{python}
import json, os, sys, time
from pathlib import Path
KEEP = ("SLURM_JOB_ID", "SLURM_NODEID", "SLURM_PROCID", "SLURM_JOB_NUM_NODES", "SLURMD_NODENAME",
        "MASTER_ADDR", "MASTER_PORT", "PYTHONFAULTHANDLER")
PREFIXES = ("NEURON_", "FI_", "NCCL_", "XLA_", "MALLOC_", "TORCH_", "NVTE_")
env = {{k: v for k, v in os.environ.items() if k in KEEP or k.startswith(PREFIXES)}}
record = {{"tool": Path(sys.argv[0]).name, "argv": sys.argv[1:], "cwd": os.getcwd(), "env": env, "time": time.time()}}
with open(os.environ["RECORD_LOG"], "a") as log:
    log.write(json.dumps(record) + "\\n")
"""


def install_recorders(directory: Path, *tools: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for tool in tools:
        path = directory / tool
        path.write_text(RECORDER.format(python=sys.executable))
        path.chmod(0o755)
    return directory


def read_records(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


TINY_JOB: dict[str, Any] = {
    "model": {"name": "tiny", "vocab_size": "data", "n_layers": 2, "dim": 64, "n_heads": 4, "ffn_dim": 192},
    "data": {
        "prefix": "set-by-submit",
        "seq_len": 64,
        "micro_batch_size": 4,
        "global_batch_size": 8,
        "validation_fraction": 0.05,
        "prefetch": 0,
    },
    "train": {"max_steps": 60, "eval_every": 0, "eval_batches": 2},
    "optim": {"lr": 3e-3, "warmup_steps": 4},
    "checkpoint": {"every": 10, "keep_last": 2},
    "metrics": {"tensorboard": False, "plot": False, "peak_flops": 1e11},
}


def write_job(path: Path, **sections: dict[str, Any]) -> Path:
    job = {name: dict(values) for name, values in TINY_JOB.items()}
    for name, values in sections.items():
        job[name] = {**job.get(name, {}), **values}
    path.write_text(yaml.safe_dump(job))
    return path


@pytest.fixture(scope="session")
def demo_data(tmp_path_factory: pytest.TempPathFactory) -> str:
    """100 documents of the demo corpus through the real `training.prepare` (byte-level BPE, 512 tokens)."""
    directory = tmp_path_factory.mktemp("job-data")
    lines = demo_corpus_path().read_text(encoding="utf-8").splitlines()[:100]
    source = directory / "docs.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    prepared = prepare_dataset([source], directory / "demo", vocab_size_to_train=512, workers=1, show_progress=False)
    return str(prepared.data_prefix)


@pytest.fixture
def tiny_config(tmp_path: Path) -> Path:
    return write_job(tmp_path / "tiny.yaml")


@pytest.fixture(autouse=True)
def _no_deployed_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a head node $LLM_TRAINING_SPEC names the deployed spec; the tests pick theirs explicitly."""
    monkeypatch.delenv("LLM_TRAINING_SPEC", raising=False)
