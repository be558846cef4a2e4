"""A hung rank on the local SLURM cluster (three nodes, a two-node FSDP job): one rank stopped with SIGSTOP mid-run.

The job runs as a user without Slurm operator rights (`nobody`), as every job does on ParallelCluster. The live rank's
watchdog ends the step with its stack traces and EXIT_HANG, the job script asks for the stopped rank's node to be
drained (a request in the drain-request spool) and requeues; that node's epilog, root, drains it with the reason, and
the requeued job runs on the two other nodes from the last checkpoint to an uninterrupted run's losses.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster.verify.local_slurm import LocalSlurm
from tests.launch.conftest import write_job
from tests.launch.slurm_helpers import (
    fsdp_argv,
    job_log,
    job_story,
    losses_by_step,
    resumed_steps,
    submit,
    trainer_rank_pid,
    wait_for_end,
    wait_for_restart,
    wait_for_resume,
    wait_for_step,
)
from tests.launch.slurm_user import (
    JOB_UID,
    JOB_USER,
    UserReachableSlurm,
    owned_by_job_user,
    shared_work_dir,
    submit_as_job_user,
)
from training.watchdog import REPORT_FILE

# Two whole jobs and a cluster's start: under make test's load this can pass the 900 s default.
pytestmark = [pytest.mark.slurm, pytest.mark.timeout(1800)]

STEPS = 40
CHECKPOINT_EVERY = 10  # write_job's
# Far above a tiny step (under a second here, even on a loaded machine), far below the process group's 30 minutes.
WATCHDOG = {"floor_s": 20, "factor": 10, "report_grace_s": 10}
NODES = ("n1", "n2", "n3")


@pytest.fixture(scope="module")
def three_nodes() -> Iterator[UserReachableSlurm]:
    """A cluster of its own: a two-node job must still find two nodes once the hung rank's node is drained."""
    if os.geteuid() != 0:
        pytest.skip("the local SLURM cluster needs root (it installs slurm-wlm and runs slurmd)")
    # Not under pytest's tmp folder (mode 700): the job user's sbatch reads slurm.conf, its jobs the spool.
    state = shared_work_dir("local-slurm-hang-")
    cluster = UserReachableSlurm(state, nodes=NODES)
    try:
        cluster.up()
        yield cluster
    finally:
        cluster.down()
        shutil.rmtree(state, ignore_errors=True)


@pytest.fixture
def user_work() -> Iterator[Path]:
    """The job user's folder: the data, the job config and the run directory, reachable and theirs."""
    work = owned_by_job_user(shared_work_dir("hang-user-"))  # llm-submit writes the script beside the run dir
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _job(tmp_path: Path) -> Path:
    return write_job(tmp_path / "tiny.yaml", train={"max_steps": STEPS}, watchdog=WATCHDOG)


def _node_of(pid: int) -> str:
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    (name,) = [entry.split(b"=", 1)[1].decode() for entry in environ if entry.startswith(b"SLURMD_NODENAME=")]
    return name


def _hostnames(cluster: LocalSlurm, nodelist: str) -> list[str]:
    return cluster.run(["scontrol", "show", "hostnames", nodelist]).stdout.split()


def test_a_stopped_rank_of_a_users_job_gets_its_node_drained_by_the_epilog_and_the_requeue_runs_elsewhere(
    three_nodes: UserReachableSlurm, demo_data: str, tmp_path: Path, user_work: Path
) -> None:
    cluster = three_nodes
    cluster.reset()
    reference = tmp_path / "reference"
    (tmp_path / "r").mkdir()
    (reference_id,) = submit(cluster, fsdp_argv(_job(tmp_path / "r"), demo_data, reference, STEPS))
    job = wait_for_end(cluster, reference_id, run_dir=reference)
    assert (job["JobState"], job["Restarts"]) == ("COMPLETED", "0"), job_story(cluster, reference, reference_id)

    data_dir = Path(demo_data).parent
    data = user_work / "data"
    shutil.copytree(data_dir, data)
    for path in [data, *data.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)  # the copy keeps pytest's mode 700
    user_data = str(data / Path(demo_data).relative_to(data_dir))
    run_dir = owned_by_job_user(user_work / "run")
    argv = fsdp_argv(_job(user_work), user_data, run_dir, STEPS)
    (job_id,) = submit_as_job_user(cluster, argv, home=user_work / "home")
    assert cluster.job(job_id)["UserId"] == f"{JOB_USER}({JOB_UID})"
    wait_for_step(run_dir, CHECKPOINT_EVERY + 2)  # past the first checkpoint
    hung = trainer_rank_pid(run_dir, rank=1)
    hung_node = _node_of(hung)
    stopped_at = time.monotonic()
    try:
        os.kill(hung, signal.SIGSTOP)  # its own watchdog stops with it: rank 0's must see the hang
        wait_for_restart(cluster, run_dir, job_id, 1)
        resumed_from = wait_for_resume(run_dir, 1)
        recovered_s = time.monotonic() - stopped_at
        job = wait_for_end(cluster, job_id, run_dir=run_dir)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(hung, signal.SIGKILL)
    story = job_story(cluster, run_dir, job_id)
    assert (job["JobState"], job["Restarts"]) == ("COMPLETED", "1"), story
    log = job_log(run_dir)

    # The live rank's stack traces, taken in the collective it waited in.
    assert "---- rank 0 (" in log and "most recent call first" in log and "in _train_step" in log, story
    hang = re.search(r"step failed \(hang: step (\d+) ran over the watchdog bound of (\d+) s; rank 1 on (\S+) ", log)
    assert hang is not None, story
    hang_step, bound_s, named_node = int(hang.group(1)), int(hang.group(2)), hang.group(3)
    assert named_node == hung_node and bound_s >= WATCHDOG["floor_s"]
    evidence = run_dir / f"hang-{job_id}.0"
    report = json.loads((evidence / REPORT_FILE).read_text())
    assert (report["silent_ranks"], report["suspect_nodes"]) == ([1], [hung_node])
    watched = json.loads((evidence / "rank-0.json").read_text())
    assert watched["bound_s"] <= watched["elapsed_s"] < 2 * watched["bound_s"]  # the step ended on the bound

    # The epilog drained the node with the job's reason (the job's user has no rights to), the requeued attempt ran
    # on the two others, and the request is gone.
    (state,) = [node for node in cluster.node_states() if node.name == hung_node]
    assert state.state in {"drained", "draining"}, (state, story)
    assert state.reason.startswith(f"job {job_id}: hang watchdog: hang: step {hang_step} ran over"), state
    assert f"hang: asked to drain {hung_node}" in log, story
    assert hung_node not in _hostnames(cluster, job["NodeList"]), job["NodeList"]
    assert list(cluster.drain_requests_dir.iterdir()) == []

    # It resumed from the last checkpoint the hung attempt committed: at most one interval lost.
    last_finished = hang_step - 1
    assert resumed_from == resumed_steps(run_dir)[0] == last_finished // CHECKPOINT_EVERY * CHECKPOINT_EVERY
    steps_lost = last_finished - resumed_from
    assert steps_lost < CHECKPOINT_EVERY
    expected, got = losses_by_step(reference), losses_by_step(run_dir)
    assert sorted(got) == list(range(1, STEPS + 1))
    for step, loss in expected.items():
        assert abs(got[step] - loss) <= 1e-6, (step, got[step], loss)
    print(f"\nhang: bound {bound_s} s, steps lost {steps_lost}, SIGSTOP to resumed training {recovered_s:.0f} s")
    cluster.reset()  # the drained node back for the next test
