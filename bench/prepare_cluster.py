"""A sharded prepare on the local Slurm cluster against one process: wall time, and the same bytes after the merge.

prepare_two_shard_array_speedup: `llm-prepare-cluster --shards 2` on the local two-node cluster (a job array of two
tasks, one per node, then the merge job), timed from submission until the merge job has ended, against
`training.prepare` over the same two input files in one process. Both tokenize with one process each, so the
ratio (one process's wall time over the array's) is what two nodes buy after Slurm's scheduling, the processes'
start and the merge's extra pass over the tokens. The merged .bin/.idx must equal the one process's byte for byte,
or the benchmark fails.
"""

from __future__ import annotations

import contextlib
import io
import os
import time
from pathlib import Path

from bench.result import BenchResult, ratio
from cluster.verify.local_slurm import LocalSlurm
from launch.prepare_cluster import main as prepare_cluster_main
from training.corpus import demo_corpus_path
from training.data.indexed import bin_path, idx_path
from training.data.manifest import manifest_path, read_manifest
from training.prepare import prepare_dataset

REPEATS_PER_FILE = 5  # each input file is the demo corpus this many times: about 10 MB, 2.6 M tokens
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}
TARGET = ">= 1.2"


def _inputs(workdir: Path) -> list[Path]:
    lines = demo_corpus_path(workdir / "corpus").read_text(encoding="utf-8").splitlines()
    files = []
    for index in range(2):
        path = workdir / "sharded-input" / f"part-{index}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        # Each file differs (the order of its documents), as a corpus's parts do.
        ordered = lines if index == 0 else lines[::-1]
        path.write_text("\n".join(ordered * REPEATS_PER_FILE) + "\n", encoding="utf-8")
        files.append(path)
    return files


def _submit_and_wait(cluster: LocalSlurm, argv: list[str]) -> float:
    conf = str(cluster.conf_path)
    saved = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = conf
    out = io.StringIO()
    try:
        start = time.perf_counter()
        with contextlib.redirect_stdout(out):
            if prepare_cluster_main(argv) != 0:
                raise RuntimeError(f"llm-prepare-cluster {' '.join(argv)} was refused")
        merge_job = out.getvalue().split()[0]
        while (state := cluster.job(merge_job).get("JobState")) not in TERMINAL:
            time.sleep(0.05)
        elapsed = time.perf_counter() - start
    finally:
        if saved is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = saved
    if state != "COMPLETED":
        raise RuntimeError(f"the merge job {merge_job} ended {state}")
    return elapsed


def sharded_prepare_benchmark(workdir: Path, tokenizer_path: Path) -> BenchResult:
    """Needs root, as the local cluster does (tests/conftest.py local_slurm_session)."""
    if os.geteuid() != 0:
        raise RuntimeError("prepare_cluster: the local Slurm cluster needs root (it runs slurmd)")
    files = _inputs(workdir)
    start = time.perf_counter()
    one = prepare_dataset(files, workdir / "one" / "corpus", tokenizer_path=tokenizer_path, workers=1)
    one_s = time.perf_counter() - start
    cluster = LocalSlurm(workdir / "slurm")
    cluster.up()
    try:
        prefix = workdir / "sharded" / "corpus"
        argv = ["--input", *map(str, files), "--output-prefix", str(prefix), "--tokenizer", str(tokenizer_path),
                "--shards", "2", "--local", "--workers", "1"]  # fmt: skip
        array_s = _submit_and_wait(cluster, argv)
    finally:
        cluster.down()
    merged = Path(f"{prefix}_text_document")
    for path in (bin_path, idx_path):
        if path(merged).read_bytes() != path(one.data_prefix).read_bytes():
            raise RuntimeError(f"{path(merged)} differs from the one process's {path(one.data_prefix)}")
    manifest = read_manifest(manifest_path(merged))
    return BenchResult(
        name="prepare_two_shard_array_speedup",
        value=round(array_s, 2),
        unit="s",
        baseline_name="prepare_one_process_s",
        baseline_value=round(one_s, 2),
        ratio=ratio(one_s, array_s),
        target=TARGET,
        note=(
            f"2 input files, {manifest.document_count:,} documents, {manifest.token_count / 1e6:.1f} M tokens; "
            "local two-node cluster, one tokenizer process per task; identical .bin/.idx after the merge"
        ),
        details=[
            "`llm-prepare-cluster --shards 2 --local --workers 1`: a job array of two tasks (one per node), each "
            "preparing one input file into its own shard, then the merge job (afterok) that concatenates them "
            "(training/data/merge.py), timed from submission to the merge job's end. The baseline is "
            "`training.prepare` over both files in this process, one tokenizer process. The ratio is the "
            "baseline's wall time over the array's (higher is better): at most 2 on two nodes, less Slurm's "
            "scheduling, the processes' start and the merge's pass over the tokens."
        ],
    )
