"""The prolog's per-job scratch on the real local SLURM cluster, against another user who plants an entry at the name
of the next job's scratch (issue 43, attack 2).

The node's scratch is mode 1777, as ParallelCluster makes /scratch. Before the job exists, another user (a process of
uid ATTACKER_UID) puts a symlink to a root-owned directory, a directory of their own or a file at
`<scratch>/slurm-<next job id>`; then `nobody` submits a job. The prolog (root) must neither change the root directory
nor hand the job anything the other user made: the job gets a new, empty directory, mode 700, its own. The epilog
removes the scratch without following a link the job's user left at its name.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cluster.verify.local_slurm import LocalSlurm
from tests.launch.slurm_helpers import TERMINAL
from tests.launch.slurm_user import JOB_UID, owned_by_job_user, shared_work_dir
from tests.waiting import wait_until

pytestmark = pytest.mark.slurm

NODE = "n1"
ATTACKER_UID = 64998  # another user of the cluster: neither root nor the job's user (no account needs it)

# What the job reports about its scratch: owner, mode, type and how many entries it holds; then that it can write.
JOB_SCRIPT = (
    's="{scratch}/slurm-$SLURM_JOB_ID"; stat -c "%u %a %F" "$s"; ls -A "$s" | wc -l; '
    'touch "$s/probe" && echo wrote; {extra}'
)


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalSlurm]:
    """One node whose scratch is 1777, in folders `nobody` can reach (sbatch reads slurm.conf, the job its scratch)."""
    if os.geteuid() != 0:
        pytest.skip("the local SLURM cluster needs root (it installs slurm-wlm and runs slurmd)")
    state = shared_work_dir("local-slurm-scratch-")
    (state / "scratch").mkdir(mode=0o755)
    local = LocalSlurm(state, nodes=(NODE,))
    try:
        local.up()
        yield local
    finally:
        local.down()
        shutil.rmtree(state, ignore_errors=True)


@pytest.fixture
def scratch(cluster: LocalSlurm) -> Path:
    cluster.reset()
    path = cluster.scratch_dir(NODE)
    path.chmod(0o1777)  # ParallelCluster's /scratch: every user may create entries there
    for entry in path.iterdir():
        subprocess.run(["rm", "-rf", "--", str(entry)], check=True)
    return path


@pytest.fixture
def root_dir() -> Iterator[Path]:
    """A directory of root's (mode 755, a file in it) that the planted link points at."""
    path = shared_work_dir("prolog-target-")
    (path / "config").write_text("root's\n")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def user_dir() -> Iterator[Path]:
    path = owned_by_job_user(shared_work_dir("scratch-user-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def as_uid(uid: int, script: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "bash", "-c", script],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def next_job_id(cluster: LocalSlurm) -> str:
    """What any user reads to learn the name of the next job's scratch."""
    for line in cluster.run(["scontrol", "show", "config"]).stdout.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "NEXT_JOB_ID":
            return value.strip()
    raise AssertionError("scontrol show config names no NEXT_JOB_ID")


def submit_as_nobody(cluster: LocalSlurm, user_dir: Path, script: str) -> tuple[str, Path]:
    out = user_dir / "job.out"
    env = {"PATH": os.environ["PATH"], "SLURM_CONF": str(cluster.conf_path), "LANG": "C.UTF-8"}
    job_id = as_uid(JOB_UID, f"sbatch --parsable -w {NODE} -o {out} --wrap '{script}'", cwd=user_dir, env=env)
    return job_id.strip(), out


def run_job(cluster: LocalSlurm, user_dir: Path, scratch: Path, planted_at: str, extra: str = "true") -> list[str]:
    """Submits nobody's job (it must get the planted name) and waits for its end, epilog included."""
    job_id, out = submit_as_nobody(cluster, user_dir, JOB_SCRIPT.format(scratch=scratch, extra=extra))
    assert job_id == planted_at
    wait_until(lambda: cluster.job(job_id).get("JobState") in TERMINAL, f"job {job_id} to end",
               story=lambda: str(cluster.job(job_id)))  # fmt: skip
    job = cluster.job(job_id)
    assert job["JobState"] == "COMPLETED", (job, out.read_text() if out.exists() else "no output")
    (node,) = cluster.node_states()
    assert node.state == "idle", node  # nothing drained: a planted entry is no fault of the node
    return out.read_text().splitlines()


def fresh_private_scratch(output: list[str]) -> bool:
    return output[:3] == [f"{JOB_UID} 700 directory", "0", "wrote"]


def tree(path: Path) -> list[tuple[str, int, int, int]]:
    """Every entry under path (itself included), with owner, group and mode, links not followed."""
    entries = [path, *sorted(path.rglob("*"))]
    return [(str(p), p.lstat().st_uid, p.lstat().st_gid, p.lstat().st_mode) for p in entries]


def plant_symlink(scratch: Path, name: str, root_dir: Path) -> None:
    as_uid(ATTACKER_UID, f"ln -s {root_dir} {scratch / name}")


def plant_directory(scratch: Path, name: str, root_dir: Path) -> None:
    """A directory of the other user's, with a folder they can still write and a link to root's directory inside."""
    planted = scratch / name
    as_uid(ATTACKER_UID, f"mkdir -m 777 {planted} {planted}/shared && ln -s {root_dir} {planted}/config")


def plant_file(scratch: Path, name: str, root_dir: Path) -> None:
    as_uid(ATTACKER_UID, f"echo planted > {scratch / name}")


@pytest.mark.parametrize("plant", [plant_symlink, plant_directory, plant_file], ids=["symlink", "directory", "file"])
def test_an_entry_planted_at_the_next_jobs_scratch_changes_nothing_of_roots_and_the_job_gets_its_own(
    cluster: LocalSlurm, scratch: Path, root_dir: Path, user_dir: Path, plant: Callable[[Path, str, Path], None]
) -> None:
    before = tree(root_dir)
    job_id = next_job_id(cluster)
    plant(scratch, f"slurm-{job_id}", root_dir)
    output = run_job(cluster, user_dir, scratch, planted_at=job_id)
    assert tree(root_dir) == before  # owner, mode and contents of root's directory as they were
    assert fresh_private_scratch(output), output
    assert not list(scratch.iterdir())  # the epilog removed the job's scratch


def test_the_epilog_removes_a_link_the_jobs_user_left_at_the_scratch_name_and_not_its_target(
    cluster: LocalSlurm, scratch: Path, root_dir: Path, user_dir: Path
) -> None:
    """The job owns its scratch, so it may replace it with a link to root's directory before it ends."""
    before = tree(root_dir)
    job_id = next_job_id(cluster)
    swap = f'rm -rf "$s" && ln -s {root_dir} "$s" && echo swapped'
    output = run_job(cluster, user_dir, scratch, planted_at=job_id, extra=swap)
    assert output[-1] == "swapped", output
    assert tree(root_dir) == before
    assert not list(scratch.iterdir())


@pytest.fixture
def enroot_parents(cluster: LocalSlurm, scratch: Path) -> Iterator[list[Path]]:
    """A GPU node's enroot parents as gpu_node.sh lays them out (root's, 755), named in the node's health settings
    (cluster.reset() rewrites them for the next test)."""
    base = shared_work_dir("enroot-parents-")
    parents = [base / name for name in ("run-enroot", "data", "cache", "tmp")]
    for parent in parents:
        parent.mkdir(mode=0o755)
    with cluster.health_config(NODE).open("a") as settings:
        settings.write(f"HEALTH_USER_DIRS={' '.join(map(str, parents))}\n")
    try:
        yield parents
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_another_user_cannot_claim_the_job_users_enroot_directories_and_the_job_gets_its_own(
    cluster: LocalSlurm, enroot_parents: list[Path], user_dir: Path, scratch: Path
) -> None:
    """Issue 43: the other user tries to make the job user's directory (or a link named like it) in every parent
    before the job; the prolog then gives `nobody` its own, mode 700, which its job writes to."""
    for parent in enroot_parents:
        target = parent / f"user-{JOB_UID}"
        for plant in (f"mkdir -m 777 {target}", f"ln -s / {target}"):
            result = subprocess.run(
                ["setpriv", f"--reuid={ATTACKER_UID}", f"--regid={ATTACKER_UID}", "--clear-groups", "bash", "-c",
                 plant], capture_output=True, text=True, check=False,
            )  # fmt: skip
            assert result.returncode != 0 and "Permission denied" in result.stderr, (plant, result)
    dirs = " ".join(str(parent / f"user-{JOB_UID}") for parent in enroot_parents)
    job_id = next_job_id(cluster)
    probe = f'for d in {dirs}; do stat -c "%u %a %F" "$d"; touch "$d/image.sqsh"; done; echo wrote'
    output = run_job(cluster, user_dir, scratch, planted_at=job_id, extra=probe)
    assert output[3:] == [f"{JOB_UID} 700 directory"] * len(enroot_parents) + ["wrote"], output
