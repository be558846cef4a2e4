"""A queue's allowed_groups on a real Slurm controller (issue 43): the partitions ParallelCluster makes of the split
spec's config (its AllowGroups included) on a local slurmctld whose /etc has the spec's accounts; alice
(pretraining) and bob (research) each submit to their own group's partition and are refused the other's, with sbatch,
srun and salloc alike (an interactive step or allocation is a job too: its nodes run as the queue's role)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster.verify.local_slurm.pcluster_shaped import PclusterShapedSlurm
from spec import parse_spec
from tests.cluster.test_users_slurm import PeoplesSlurm
from tests.spec.test_queue_groups import split_spec

pytestmark = pytest.mark.slurm

REFUSED = "User's group not permitted to use this partition"


class GroupsSlurm(PeoplesSlurm, PclusterShapedSlurm):
    """The spec's partitions on a controller that runs where alice and bob exist (tests/cluster/test_users_slurm)."""


@pytest.fixture(scope="module")
def slurm() -> Iterator[GroupsSlurm]:
    state = Path(tempfile.mkdtemp(prefix="local-slurm-groups-"))
    state.chmod(0o755)  # the users' sbatch reads slurm.conf under it
    local = GroupsSlurm.for_spec(state, parse_spec(split_spec()))
    assert isinstance(local, GroupsSlurm)
    try:
        local.up()
        yield local
    finally:
        local.down()
        shutil.rmtree(state, ignore_errors=True)


def submit(slurm: GroupsSlurm, user: str, partition: str) -> tuple[int, str]:
    """`sbatch --test-only` as the user: the controller's answer, no job started."""
    argv = ["runuser", "-u", user, "--", "sbatch", "--test-only", f"--partition={partition}", "--nodes=1"]
    result = slurm.run([*argv, "--output=/dev/null", "--wrap", "true"], check=False)
    return result.returncode, result.stderr.strip()


def test_the_partitions_carry_the_specs_allowed_groups(slurm: GroupsSlurm) -> None:
    for partition, group in (("pretrain", "pretraining"), ("research", "research")):
        shown = slurm.run(["scontrol", "show", "partition", partition]).stdout
        assert f"AllowGroups={group} " in shown, shown


@pytest.mark.parametrize(("user", "own", "other"), [("alice", "pretrain", "research"), ("bob", "research", "pretrain")])
def test_a_user_submits_to_their_groups_partition_and_not_to_anothers(
    slurm: GroupsSlurm, user: str, own: str, other: str
) -> None:
    code, answer = submit(slurm, user, own)
    assert code == 0 and "to start at" in answer, answer
    code, answer = submit(slurm, user, other)
    assert code != 0 and REFUSED in answer, answer


def as_user(slurm: GroupsSlurm, user: str, *argv: str) -> tuple[int, str]:
    """A Slurm client run as the user (runuser: their uid and groups); its exit status and what it said."""
    result = slurm.run(["runuser", "-u", user, "--", *argv], check=False)
    return result.returncode, result.stderr.strip()


@pytest.mark.parametrize(("user", "own", "other"), [("alice", "pretrain", "research"), ("bob", "research", "pretrain")])
def test_srun_is_refused_on_another_groups_partition(slurm: GroupsSlurm, user: str, own: str, other: str) -> None:
    command = ("srun", "--test-only", "--nodes=1")
    code, answer = as_user(slurm, user, *command, f"--partition={own}", "true")
    assert code == 0 and "to start at" in answer, answer
    code, answer = as_user(slurm, user, *command, f"--partition={other}", "true")
    assert code != 0 and REFUSED in answer, answer


@pytest.mark.parametrize(("user", "other"), [("alice", "research"), ("bob", "pretrain")])
def test_salloc_is_refused_on_another_groups_partition(slurm: GroupsSlurm, user: str, other: str) -> None:
    # salloc has no --test-only, and an allocation it is granted waits for nodes that never boot here (no slurmd):
    # the refusal is what is checked, an answer at submission with no job made.
    code, answer = as_user(slurm, user, "salloc", "--no-shell", "--nodes=1", f"--partition={other}")
    assert code != 0 and REFUSED in answer, answer
    assert slurm.run(["squeue", "-h", "-u", user]).stdout.strip() == ""
