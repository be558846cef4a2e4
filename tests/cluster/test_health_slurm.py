"""The health prolog on the real local SLURM cluster: a failing node drains itself and the job moves on."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.verify.local_slurm import LocalSlurm
from cluster.verify.local_slurm.harness import NodeState
from tests.launch.slurm_helpers import TERMINAL
from tests.waiting import wait_until


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

    def n2_drained() -> NodeState | None:
        n2 = {s.name: s for s in cluster.node_states()}["n2"]
        return n2 if n2.state in {"drained", "draining"} else None

    n2 = wait_until(n2_drained, "n2 drained by its health prolog", story=lambda: str(cluster.node_states()))
    assert n2.reason.startswith("health-prolog: gpu count 0, expected 8")

    cluster.run(["scontrol", "update", "nodename=n1", "state=resume"])
    wait_until(lambda: cluster.job(job_id)["JobState"] in TERMINAL, f"job {job_id} requeued onto n1 to end",
               story=lambda: str(cluster.job(job_id)))  # fmt: skip
    job = cluster.job(job_id)
    assert (job["JobState"], job["NodeList"], job["Restarts"]) == ("COMPLETED", "n1", "1")
    assert out.read_text().strip().splitlines()[-1] == "ran on n1"
