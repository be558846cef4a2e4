"""llm-prepare-cluster on the local SLURM cluster: a real two-task job array and its merge job. One task is killed
with SIGKILL (as the OOM killer would): it fails naming its shard, the merge is cancelled, llm-follow names the
shard; the same command again prepares only that shard, and the merge equals one `prepare` over all the inputs."""

import contextlib
import io
import os
import re
import signal
from pathlib import Path

import pytest

from cluster.verify.local_slurm import LocalSlurm
from launch.follow import follow
from launch.prepare_cluster import main as prepare_cluster_main
from tests.launch.slurm_helpers import wait_for_end
from tests.waiting import wait_until
from training.corpus import demo_corpus_path
from training.data.indexed import bin_path, idx_path
from training.data.manifest import manifest_path, read_manifest
from training.prepare import prepare_dataset

pytestmark = pytest.mark.slurm


def write_corpus(directory: Path) -> tuple[list[Path], Path]:
    """A small first file and a second one large enough that its task is still tokenizing when the test kills it
    (the whole demo corpus, three times: about 6 MB), and a tokenizer trained on the small one."""
    lines = demo_corpus_path().read_text(encoding="utf-8").splitlines()
    small, large = directory / "a.jsonl", directory / "b.jsonl"
    small.write_text("\n".join(lines[:20]) + "\n", encoding="utf-8")
    large.write_text("\n".join(lines * 3) + "\n", encoding="utf-8")
    trained = prepare_dataset([small], directory / "tok", vocab_size_to_train=400, workers=1, show_progress=False)
    return [small, large], trained.tokenizer_path


def submit_prepare(cluster: LocalSlurm, argv: list[str]) -> tuple[str, str]:
    """Runs llm-prepare-cluster in process; its stdout (the merge job's line first)."""
    out, err = io.StringIO(), io.StringIO()
    os.environ["SLURM_CONF"] = str(cluster.conf_path)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = prepare_cluster_main(argv)
    finally:
        del os.environ["SLURM_CONF"]
    assert code == 0, err.getvalue()
    return out.getvalue(), err.getvalue()


def follow_output(cluster: LocalSlurm, job: str, run_dir: Path) -> tuple[int, str]:
    out = io.StringIO()
    os.environ["SLURM_CONF"] = str(cluster.conf_path)
    try:
        code = follow(job, run_dir, timeout_s=600, out=out, poll_s=0.5)
    finally:
        del os.environ["SLURM_CONF"]
    return code, out.getvalue()


def test_a_killed_shard_is_named_and_only_it_is_prepared_again(local_slurm: LocalSlurm, tmp_path: Path) -> None:
    inputs, tokenizer = write_corpus(tmp_path)
    prefix = tmp_path / "out" / "corpus"
    argv = ["--input", *map(str, inputs), "--output-prefix", str(prefix), "--tokenizer", str(tokenizer),
            "--shards", "2", "--local", "--workers", "1", "--progress-every", "0.5", "--time", "00:20:00"]  # fmt: skip
    shards = Path(f"{prefix}_shards")
    stdout, _ = submit_prepare(local_slurm, argv)
    merge_job, array_job = (line.split()[0] for line in stdout.splitlines()[:2])
    log = shards / "logs" / f"prepare-{array_job}-shard-1.out"
    started = re.compile(r"preparing in process (\d+)")
    # Killed mid-way: once it has printed a progress line with an ETA (every 0.5 s here).
    pid = int(
        wait_until(
            lambda: (
                log.is_file() and re.search(r"ETA \d+:\d\d:\d\d", log.read_text()) and started.search(log.read_text())
            ),
            "shard 1's task to report its progress",
            poll_s=0.05,
        ).group(1)
    )
    os.kill(pid, signal.SIGKILL)

    killed = wait_for_end(local_slurm, f"{array_job}_1", run_dir=shards)
    assert killed["JobState"] == "FAILED", log.read_text()
    assert wait_for_end(local_slurm, f"{array_job}_0")["JobState"] == "COMPLETED"
    assert wait_for_end(local_slurm, merge_job)["JobState"] == "CANCELLED"  # afterok never satisfied
    assert f"error: shard 1 of {shards / 'plan.json'}: its prepare process was killed by signal 9" in log.read_text()
    code, followed = follow_output(local_slurm, merge_job, shards)
    assert code == 1
    assert f"error: shard 1 of 2 ({inputs[1].resolve()}): not prepared" in followed, followed
    assert re.search(r"shard 1 of 2 \(.*\): \d+% of [\d.]+ MB read, [\d,]+ documents, .* ETA \d+:\d\d:\d\d", followed)
    assert not bin_path(f"{prefix}_text_document").exists()

    first_shard = bin_path(shards / "shard-00000_text_document").stat()
    stdout, _ = submit_prepare(local_slurm, argv)
    merge_job, array_job = (line.split()[0] for line in stdout.splitlines()[:2])
    assert "(shards 1 of 2)" in stdout
    assert wait_for_end(local_slurm, merge_job, run_dir=shards)["JobState"] == "COMPLETED"
    again = bin_path(shards / "shard-00000_text_document").stat()
    assert (again.st_ino, again.st_mtime_ns) == (first_shard.st_ino, first_shard.st_mtime_ns)
    assert sorted(p.name for p in (shards / "logs").glob(f"prepare-{array_job}-shard-*.out")) == [
        f"prepare-{array_job}-shard-1.out"
    ]
    code, followed = follow_output(local_slurm, merge_job, shards)
    assert code == 0 and f"dataset         {prefix}_text_document" in followed, followed

    reference = prepare_dataset(inputs, tmp_path / "one" / "corpus", tokenizer_path=tokenizer, workers=1)
    merged = Path(f"{prefix}_text_document")
    assert bin_path(merged).read_bytes() == bin_path(reference.data_prefix).read_bytes()
    assert idx_path(merged).read_bytes() == idx_path(reference.data_prefix).read_bytes()
    assert read_manifest(manifest_path(merged)).sources == reference.manifest.sources
