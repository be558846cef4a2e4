"""The epilog's drain requests (cluster/health/epilog.sh): a job asks, through a file in the root-owned spool on the
shared file system, that the epilog (root) drain a node of that job. The epilog drains only its own node, only for
a regular file owned by the job's user and named after the job; the real bash against fixture trees, with the
recording scontrol of test_health.py."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.cluster.test_health import STRANGER_UID, Node

JOB_ID = "77"  # Node's SLURM_JOB_ID
THIS_NODE = "p5-st-1"  # Node's SLURMD_NODENAME
OTHER_UID = STRANGER_UID - 1  # another user of the cluster, neither root nor the job's


@pytest.fixture
def node(tmp_path: Path) -> Node:
    node = Node(tmp_path)
    node.env.update(SLURM_JOB_UID=str(STRANGER_UID), SLURM_JOB_USER="stranger")
    spool(node).mkdir(parents=True)
    spool(node).chmod(0o1733)  # as head_node.sh makes it: root's, sticky, users may add but not list
    return node


def spool(node: Node) -> Path:
    return node.fsx / ".slurm" / "drain-requests"


def request(node: Node, name: str, text: str, uid: int = STRANGER_UID) -> Path:
    path = spool(node) / name
    path.write_text(text)
    os.chown(path, uid, uid)
    return path


def hang_request(node: Node, listed: str = THIS_NODE, uid: int = STRANGER_UID, job: str = JOB_ID) -> Path:
    return request(node, f"{job}.{listed}.a1B2c3D4", f"node={listed}\nreason=hang watchdog: rank 1 silent\n", uid)


def epilog(node: Node, **env: str) -> subprocess.CompletedProcess[str]:
    result = node.run("epilog", **env)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def test_a_request_of_the_jobs_user_drains_this_node_with_its_reason_and_is_removed(node: Node) -> None:
    asked = hang_request(node)
    result = epilog(node)
    assert node.drain_calls() == [
        f"update nodename={THIS_NODE} state=drain reason=job {JOB_ID}: hang watchdog: rank 1 silent"
    ]
    assert f"health: drained {THIS_NODE} on request of job {JOB_ID}" in result.stdout
    assert not asked.exists()


def test_a_request_of_another_uid_drains_nothing_and_is_removed(node: Node) -> None:
    planted = hang_request(node, uid=OTHER_UID)
    result = epilog(node)
    assert node.drain_calls() == []
    assert f"ignored drain request {planted.name}: owned by uid {OTHER_UID}, not the job's {STRANGER_UID}" in (
        result.stdout
    )
    assert not planted.exists()


def test_a_root_owned_request_drains_nothing(node: Node) -> None:
    """Root is not the job's user either: a file root left there (or a hard link to one) is no request."""
    hang_request(node, uid=0)
    epilog(node)
    assert node.drain_calls() == []


def test_a_symlink_to_a_valid_request_drains_nothing(node: Node) -> None:
    elsewhere = node.root / "elsewhere"
    elsewhere.write_text(f"node={THIS_NODE}\nreason=hang watchdog\n")
    os.chown(elsewhere, STRANGER_UID, STRANGER_UID)
    link = spool(node) / f"{JOB_ID}.{THIS_NODE}.linkXXXX"
    link.symlink_to(elsewhere)
    os.lchown(link, STRANGER_UID, STRANGER_UID)
    result = epilog(node)
    assert node.drain_calls() == []
    assert f"ignored drain request {link.name}: a symbolic link, not a regular file" in result.stdout
    assert not link.is_symlink() and elsewhere.exists()


def test_a_fifo_is_no_request_and_does_not_block_the_epilog(node: Node) -> None:
    fifo = spool(node) / f"{JOB_ID}.{THIS_NODE}.fifoXXXX"
    os.mkfifo(fifo)
    os.chown(fifo, STRANGER_UID, STRANGER_UID)
    result = epilog(node)  # Node.run's timeout fails the test if reading blocked
    assert node.drain_calls() == []
    assert f"ignored drain request {fifo.name}: a fifo, not a regular file" in result.stdout


def test_a_request_listing_another_node_drains_nothing_here_and_stays_for_that_nodes_epilog(node: Node) -> None:
    for_other = hang_request(node, listed="p5-st-2")
    epilog(node)
    assert node.drain_calls() == []
    assert for_other.exists()


def test_a_request_whose_name_and_content_disagree_drains_nothing(node: Node) -> None:
    """The name says this node, the content another: no drain (the content is what was asked)."""
    request(node, f"{JOB_ID}.{THIS_NODE}.mixedXXX", "node=p5-st-2\nreason=hang watchdog\n")
    epilog(node)
    assert node.drain_calls() == []


def test_a_request_of_another_job_drains_nothing(node: Node) -> None:
    """The same user's request for their job 78 is not read by the epilog of job 77."""
    other_job = hang_request(node, job="78")
    epilog(node)
    assert node.drain_calls() == []
    assert other_job.exists()


def test_the_reason_is_printable_and_bounded(node: Node) -> None:
    request(node, f"{JOB_ID}.{THIS_NODE}.reasonXX", f"node={THIS_NODE}\nreason=bad\x07\x1b[31m tail {'x' * 400}\n")
    epilog(node)
    (call,) = node.drain_calls()
    reason = call.split("reason=", 1)[1]
    assert reason.startswith(f"job {JOB_ID}: bad[31m tail xxx")
    assert reason.isprintable() and len(reason) <= 200


def test_a_spool_that_is_not_roots_sticky_directory_is_not_trusted(node: Node) -> None:
    hang_request(node)
    spool(node).chmod(0o777)  # no sticky bit: any user could replace another's request
    result = epilog(node)
    assert node.drain_calls() == []
    assert f"drain requests: {spool(node)} is not root's sticky directory (mode 777, owner 0); ignored" in (
        result.stdout
    )


def test_requests_older_than_a_day_are_removed(node: Node) -> None:
    """A request whose node never ran the epilog (the node died and was replaced) does not pile up."""
    stale = hang_request(node, listed="gone-node", job="12")
    fresh = hang_request(node, listed="p5-st-2", job="13")
    day_ago = time.time() - 86_400 - 60
    os.utime(stale, (day_ago, day_ago))
    epilog(node)
    assert not stale.exists() and fresh.exists()


def test_report_only_mode_says_what_it_would_drain_and_leaves_the_request(node: Node) -> None:
    asked = hang_request(node)
    result = epilog(node, HEALTH_DRAIN="0")
    assert node.drain_calls() == []
    assert f"not drained (HEALTH_DRAIN=0): {THIS_NODE} on request of job {JOB_ID}" in result.stdout
    assert asked.exists()


def test_without_a_job_uid_nothing_is_read(node: Node) -> None:
    asked = hang_request(node)
    epilog(node, SLURM_JOB_UID="")
    assert node.drain_calls() == []
    assert asked.exists()
