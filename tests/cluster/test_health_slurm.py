"""The health prolog on the real local SLURM cluster: a failing node drains itself and the job moves on."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cluster.local_slurm import LocalSlurm


@pytest.mark.slurm
def test_a_node_failing_the_prolog_is_drained_and_the_job_runs_on_the_other(
    local_slurm: LocalSlurm, tmp_path: Path
) -> None:
    cluster = local_slurm
    # n2 "loses" its GPUs: its settings now expect 8, and it has none.
    cluster.health_config("n2").write_text(cluster.health_config("n2").read_text() + "HEALTH_EXPECTED_GPUS=8\n")
    # Hold n1 so the scheduler's first choice is n2; release it once n2 has failed.
    cluster.run(["scontrol", "update", "nodename=n1", "state=drain", "reason=test-hold"])
    out = tmp_path / "job.out"
    job_id = cluster.run(
        ["sbatch", "--parsable", "-N", "1", "-o", str(out), "--wrap", "echo ran on $SLURMD_NODENAME"]
    ).stdout.strip()

    deadline = time.monotonic() + 60
    n2 = None
    while time.monotonic() < deadline:
        n2 = {s.name: s for s in cluster.node_states()}["n2"]
        if n2.state in {"drained", "draining"}:
            break
        time.sleep(0.3)
    assert n2 is not None and n2.state in {"drained", "draining"}, n2
    assert n2.reason.startswith("health-prolog: gpu count 0, expected 8")

    cluster.run(["scontrol", "update", "nodename=n1", "state=resume"])
    while time.monotonic() < deadline and cluster.job(job_id)["JobState"] != "COMPLETED":
        time.sleep(0.3)
    job = cluster.job(job_id)
    assert (job["JobState"], job["NodeList"], job["Restarts"]) == ("COMPLETED", "n1", "1")
    assert out.read_text().strip().splitlines()[-1] == "ran on n1"
