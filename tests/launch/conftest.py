"""Fixtures for the job tests: a real prepared dataset, a tiny job config, and tool recorders."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.training.jobs import prepare_demo_subset, tiny_job

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


def write_job(path: Path, **sections: dict[str, Any]) -> Path:
    """The tiny job (tests/training/jobs.py) as submitted: the data prefix is submit's, long enough to requeue."""
    job = tiny_job("set-by-submit", data={"prefetch": 0}, train={"max_steps": 60}, checkpoint={"every": 10})
    for name, values in sections.items():
        job[name] = {**job.get(name, {}), **values}
    path.write_text(yaml.safe_dump(job))
    return path


def write_mixture_job(path: Path, datasets: list[tuple[float, str]], **sections: dict[str, Any]) -> Path:
    """write_job's job reading a mixture (data.datasets) instead of --data-prefix."""
    write_job(path, **sections)
    job = yaml.safe_load(path.read_text())
    del job["data"]["prefix"]
    job["data"]["datasets"] = [{"prefix": prefix, "weight": weight} for weight, prefix in datasets]
    path.write_text(yaml.safe_dump(job))
    return path


@pytest.fixture(scope="session")
def demo_data(tmp_path_factory: pytest.TempPathFactory) -> str:
    """100 documents of the demo corpus through the real `training.prepare` (byte-level BPE, 512 tokens)."""
    return prepare_demo_subset(tmp_path_factory.mktemp("job-data"))


def nemo2507_spec_file(path: Path) -> Path:
    """The default spec with the pinned NeMo 2.4 choice: cluster.containers.nemo_framework nemo-25.07 (its image
    tag and .sqsh then default to the 25.07 build)."""
    spec = yaml.safe_load((REPO / "spec" / "default.yaml").read_text())
    spec["cluster"]["containers"] = {"pyxis": True, "nemo_framework": "nemo-25.07", "ecr_repository": "llm-nemo-efa"}
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.fixture(scope="session")
def nemo2507_spec(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return nemo2507_spec_file(tmp_path_factory.mktemp("spec") / "nemo-25.07.yaml")


@pytest.fixture
def tiny_config(tmp_path: Path) -> Path:
    return write_job(tmp_path / "tiny.yaml")


@pytest.fixture(autouse=True)
def _no_deployed_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a head node $LLM_TRAINING_SPEC names the deployed spec; the tests pick theirs explicitly."""
    monkeypatch.delenv("LLM_TRAINING_SPEC", raising=False)


@pytest.fixture
def gpu_config(tmp_path: Path) -> Path:
    """The tiny job with a global batch that two 8-GPU nodes can split (16 ranks x micro-batch 4)."""
    return write_job(tmp_path / "tiny-gpu.yaml", data={"global_batch_size": 64})
