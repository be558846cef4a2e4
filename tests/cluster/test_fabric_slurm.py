"""The fabric check jobs, rendered for their real queues (p5, trn1) and run on the local 2-node SLURM cluster.

Only the benchmark binaries are stand-ins: a recorder named all_reduce_perf / nccom-test logs its argv and
environment, prints a canned output in the tool's format and adds traffic to the nodes' fixture EFA counters (or
not: then the check must fail). sbatch, srun, the counter sampling on every node and the check itself are real.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster.fabric.cli import main
from cluster.fabric.render import NCCOM_ARGS
from cluster.verify.local_slurm import LocalSlurm
from tests.cluster.test_fabric_cli import clean_bash
from tests.cluster.test_fabric_counters import efa_tree, memory_scratch
from tests.cluster.test_fabric_parsers import FIXTURES
from tests.launch.slurm_helpers import wait_for_end

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "fabric-checks.md"
TRN1_SPEC = REPO / "spec" / "examples" / "trn1-neuron.yaml"
GIB = 1 << 30
SOCKETS = (
    "FAIL: EFA counters did not move: NCCL used sockets (check FI_PROVIDER, the aws-ofi-nccl plugin, "
    "the security group's self rule)"
)

RECORDER = """#!{python}
import json, os, sys
from pathlib import Path
tool = Path(sys.argv[0]).name
node = os.environ.get("SLURMD_NODENAME", "")
prefixes = ("NCCL_", "FI_", "NEURON_", "SLURM_", "TORCH_", "XLA_", "MALLOC_", "PYTHON")
env = {{k: v for k, v in os.environ.items() if k.startswith(prefixes)}}
with open(os.environ["RECORD_LOG"], "a") as log:
    log.write(json.dumps({{"tool": tool, "argv": sys.argv[1:], "node": node, "env": env}}) + "\\n")
# NCCL's per-rank debug log, where NCCL_DEBUG_FILE puts it (%h host, %p pid).
if "NCCL_DEBUG_FILE" in os.environ:
    debug = os.environ["NCCL_DEBUG_FILE"].replace("%h", node).replace("%p", str(os.getpid()))
    network = os.environ["FAKE_NCCL_NETWORK"]
    Path(debug).write_text(f"{{node}}:{{os.getpid()}}:{{os.getpid()}} [0] NCCL INFO Using network {{network}}\\n")
# Traffic: each node's first rank (nccl-tests), or nccom-test for every host it drives.
if tool == "nccom-test":
    nodes = os.environ["FAKE_NODES"].split()
else:
    nodes = [node] if os.environ.get("SLURM_LOCALID") == "0" else []
amount = int(os.environ["FAKE_EFA_BYTES_PER_DEVICE"])
for name in nodes:
    root = Path(os.environ["FABRIC_SYSFS_ROOT"].replace("%n", name)) / "class" / "infiniband"
    for counters in root.glob("*/ports/1/hw_counters"):
        for counter, add in (("tx_bytes", amount), ("rx_bytes", amount), ("tx_pkts", amount // 8192)):
            (counters / counter).write_text(str(int((counters / counter).read_text()) + add) + "\\n")
if tool == "nccom-test" or os.environ.get("SLURM_PROCID") == "0":
    print(Path(os.environ["FAKE_OUTPUT"]).read_text(), end="")
"""


@pytest.fixture
def fast_tmp(tmp_path: Path) -> Iterator[Path]:
    with memory_scratch(tmp_path) as directory:
        yield directory


def install_recorder(directory: Path, tool: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / tool
    path.write_text(RECORDER.format(python=sys.executable))
    path.chmod(0o755)
    return directory


def render_and_submit(cluster: LocalSlurm, argv: list[str], env: dict[str, str]) -> str:
    """`python -m cluster.fabric render ARGV` in process, with `env` in the environment sbatch passes on."""
    saved = dict(os.environ)
    os.environ.update({"SLURM_CONF": str(cluster.conf_path), **env})
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["render", *argv, "--partition", "local", "--sbatch-arg=--overcommit"])
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert code == 0, err.getvalue()
    return out.getvalue().split()[0]


def read_records(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def finished(cluster: LocalSlurm, job_id: str, results: Path, passed: bool) -> tuple[str, str]:
    """The job's log and verdict, after checking its end state matches the verdict."""
    job = wait_for_end(cluster, job_id)
    (log,) = (results / "logs").glob(f"*-{job_id}.out")
    text = log.read_text()
    expected = ("COMPLETED", "0:0") if passed else ("FAILED", "1:0")
    assert (job["JobState"], job["ExitCode"]) == expected, text
    (result_dir,) = results.glob(f"fabric-*-{job_id}")
    assert sorted(path.name for path in (result_dir / "counters-before").iterdir()) == ["n1.txt", "n2.txt"]
    assert sorted(path.name for path in (result_dir / "counters-after").iterdir()) == ["n1.txt", "n2.txt"]
    return text, (result_dir / "verdict.txt").read_text()


def documented_layout(accelerator: str) -> set[str]:
    """The result files docs/fabric-checks.md lists (the text block after "Results land"), relative to --output,
    for one accelerator: a line ending in "(GPU)" or "(Trainium)" is that accelerator's only."""
    section = DOC.read_text().split("Results land", 1)[1]
    block = re.search(r"```text\n(.*?)```", section, flags=re.S)
    assert block, "docs/fabric-checks.md: no ```text block of the result files after 'Results land'"
    other = {"GPU": "(Trainium)", "Trainium": "(GPU)"}[accelerator]
    return {line.split()[0] for line in block.group(1).splitlines() if line.strip() and not line.endswith(other)}


def written_layout(results: Path, job_id: str, job_name: str) -> set[str]:
    """Every file under --output after the job, named as the doc names them (placeholders for the variable parts)."""
    names = set()
    for path in results.rglob("*"):
        if path.is_file():
            name = re.sub(
                r"/counters-(before|after)/[^/]+\.txt$", r"/counters-\1/<node>.txt", str(path.relative_to(results))
            )
            name = re.sub(r"/nccl-debug/[^/]+\.\d+\.log$", "/nccl-debug/<host>.<pid>.log", name)
            name = name.replace(f"{job_name}-{job_id}", "fabric-<tool>-<queue>-<jobid>")
            names.add(name.replace(job_name, "fabric-<tool>-<queue>"))
    return names


@pytest.mark.parametrize("efa_moved", [True, False], ids=["efa-used", "counters-still"])
def test_gpu_job_runs_all_reduce_perf_one_rank_per_gpu_and_judges_it(
    local_slurm: LocalSlurm, tmp_path: Path, fast_tmp: Path, efa_moved: bool
) -> None:
    for node in ("n1", "n2"):
        efa_tree(fast_tmp / node, devices=32)
    nccl_tests = install_recorder(tmp_path / "nccl-tests" / "build", "all_reduce_perf")
    tuner = tmp_path / "ofi-nccl" / "lib" / "libnccl-ofi-tuner.so"
    tuner.parent.mkdir(parents=True)
    tuner.touch()
    record_log, results = tmp_path / "record.jsonl", tmp_path / "results"
    env = {
        "NCCL_TESTS_DIR": str(nccl_tests),
        "OFI_NCCL_DIR": str(tmp_path / "ofi-nccl"),
        "FABRIC_SYSFS_ROOT": f"{fast_tmp}/%n",
        "RECORD_LOG": str(record_log),
        "FAKE_OUTPUT": str(FIXTURES / "all_reduce_perf-2x-p5.48xlarge.txt"),
        "FAKE_EFA_BYTES_PER_DEVICE": str(32 * GIB if efa_moved else 0),
        "FAKE_NCCL_NETWORK": "Libfabric" if efa_moved else "Socket",
    }
    # The local cluster's slurm-wlm has no PMIx library; ParallelCluster's SLURM does (pmix is the default).
    argv = ["--queue", "gpu", "--nodes", "2", "--output", str(results), "--mpi", "pmi2"]
    job_id = render_and_submit(local_slurm, argv, env)
    log, verdict = finished(local_slurm, job_id, results, passed=efa_moved)
    clean_bash(results / "fabric-nccl-gpu.sbatch")
    assert written_layout(results, job_id, "fabric-nccl-gpu") == documented_layout("GPU")

    step = f"step: srun --nodes=2 --ntasks-per-node=8 --mpi=pmi2 --kill-on-bad-exit=1 {nccl_tests}/all_reduce_perf"
    assert f"{step} -b 8 -e 16G -f 2 -g 1\n" in log
    records = read_records(record_log)
    assert len(records) == 16
    assert sorted(int(record["env"]["SLURM_PROCID"]) for record in records) == list(range(16))
    assert sorted(record["node"] for record in records) == ["n1"] * 8 + ["n2"] * 8
    result_dir = results / f"fabric-nccl-gpu-{job_id}"
    for record in records:
        assert record["argv"] == ["-b", "8", "-e", "16G", "-f", "2", "-g", "1"]
        assert record["env"]["SLURM_JOB_ID"] == job_id
        for name, value in {
            "FI_PROVIDER": "efa",
            "FI_EFA_USE_HUGE_PAGE": "0",
            "FI_EFA_SET_CUDA_SYNC_MEMOPS": "0",
            "NCCL_SOCKET_IFNAME": "^docker,lo,veth",
            "NCCL_BUFFSIZE": "8388608",
            "NCCL_P2P_NET_CHUNKSIZE": "524288",
            "NCCL_TUNER_PLUGIN": str(tuner),
            "NCCL_DEBUG": "INFO",
            "NCCL_DEBUG_SUBSYS": "INIT,NET",
            "NCCL_DEBUG_FILE": f"{result_dir}/nccl-debug/%h.%p.log",
            "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
        }.items():
            assert record["env"].get(name) == value, name
        assert "FI_EFA_USE_DEVICE_RDMA" not in record["env"]

    lines = verdict.splitlines()
    assert lines[0] == "fabric check: all_reduce_perf on 2 x p5.48xlarge, 16 ranks on 2 hosts"
    if efa_moved:
        assert "  n1: 32 EFA devices, tx 1 TiB, rx 1 TiB" in lines
        assert "  NCCL network: Libfabric on 16 ranks; libfabric provider: not logged" in lines
        assert lines[-1] == "fabric check: PASSED"
    else:
        assert "  n2: 32 EFA devices, tx 0 B, rx 0 B" in lines
        assert [line for line in lines if line.startswith("FAIL")] == [
            SOCKETS,
            "FAIL: NCCL chose the Socket transport on 16 ranks: the aws-ofi-nccl plugin did not load (check "
            "LD_LIBRARY_PATH for libnccl-net, FI_PROVIDER=efa)",
        ]
        assert lines[-1] == "fabric check: FAILED (2 problems)"
    assert verdict in log  # the verdict is in the job log too


@pytest.mark.parametrize("efa_moved", [True, False], ids=["efa-used", "counters-still"])
def test_trn1_job_runs_nccom_test_across_the_hosts_and_judges_it(
    local_slurm: LocalSlurm, tmp_path: Path, fast_tmp: Path, efa_moved: bool
) -> None:
    for node in ("n1", "n2"):
        efa_tree(fast_tmp / node, devices=8)
    neuron_bin = install_recorder(tmp_path / "neuron" / "bin", "nccom-test")
    record_log, results = tmp_path / "record.jsonl", tmp_path / "results"
    env = {
        "NEURON_BIN_DIR": str(neuron_bin),
        "FABRIC_SYSFS_ROOT": f"{fast_tmp}/%n",
        "RECORD_LOG": str(record_log),
        "FAKE_OUTPUT": str(FIXTURES / "nccom-test-2x-trn1.32xlarge.txt"),
        "FAKE_NODES": "n1 n2",
        "FAKE_EFA_BYTES_PER_DEVICE": str(16 * GIB if efa_moved else 0),
    }
    argv = ["--queue", "trn1", "--nodes", "2", "--spec", str(TRN1_SPEC), "--output", str(results)]
    job_id = render_and_submit(local_slurm, argv, env)
    log, verdict = finished(local_slurm, job_id, results, passed=efa_moved)
    clean_bash(results / "fabric-nccom-trn1.sbatch")
    assert written_layout(results, job_id, "fabric-nccom-trn1") == documented_layout("Trainium")

    (record,) = read_records(record_log)  # one launcher, on the batch host; it starts the workers itself
    assert record["node"] == "n1" and record["env"]["SLURM_JOB_ID"] == job_id
    assert record["argv"] == ["-r", "64", "-N", "2", *NCCOM_ARGS, "allr", "--hosts", "127.0.0.1", "127.0.0.1"]
    assert re.fullmatch(r"127\.0\.0\.1:\d+", record["env"]["NEURON_RT_ROOT_COMM_ID"])
    for name, value in {
        "FI_PROVIDER": "efa",
        "FI_EFA_USE_DEVICE_RDMA": "1",
        "FI_EFA_FORK_SAFE": "1",
        "NEURON_RT_STOCHASTIC_ROUNDING_EN": "1",
        "NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS": "5",
        "NEURON_COMPILE_CACHE_URL": "/fsx/neuron-cache",
        "MALLOC_ARENA_MAX": "128",
    }.items():
        assert record["env"].get(name) == value, name
    comm_id = record["env"]["NEURON_RT_ROOT_COMM_ID"]
    assert f"step: NEURON_RT_ROOT_COMM_ID={comm_id} {neuron_bin}/nccom-test -r 64 -N 2 " in log

    lines = verdict.splitlines()
    assert lines[0] == "fabric check: nccom-test on 2 x trn1.32xlarge"
    assert "  EFA bytes each node must exchange for this test: at least 80.0 GiB each way" in lines
    if efa_moved:
        assert "  n2: 8 EFA devices, tx 128 GiB, rx 128 GiB" in lines
        assert lines[-1] == "fabric check: PASSED"
    else:
        assert lines[-2:] == [
            "FAIL: EFA counters did not move: the Neuron runtime did not use EFA (check FI_PROVIDER=efa, "
            "aws-neuronx-collectives, the security group's self rule)",
            "fabric check: FAILED (1 problem)",
        ]
