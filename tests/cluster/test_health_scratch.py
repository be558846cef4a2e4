"""The prolog's per-job scratch (cluster/health/lib.sh health_make_job_scratch) against fixture trees: the real bash,
entries planted by another uid, a scratch parent that lets users replace root's entries, a race and a read-only file
system. The same attacks on the local SLURM cluster: test_health_scratch_slurm.py."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.test_health import STRANGER_UID, Node
from tests.launch.slurm_user import shared_work_dir

JOB_ID = "77"  # Node's SLURM_JOB_ID
OTHER_UID = STRANGER_UID - 1  # another user of the cluster, neither root nor the job's


@pytest.fixture
def node() -> Iterator[Node]:
    """Not under pytest's tmp folder (root's, mode 700): the other uid must reach the scratch to plant in it."""
    root = shared_work_dir("hs-")
    node = Node(root)
    node.env.update(SLURM_JOB_UID=str(STRANGER_UID), SLURM_JOB_GID=str(STRANGER_UID))
    node.scratch.chmod(0o1777)  # ParallelCluster's /scratch
    try:
        yield node
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def root_dir(node: Node) -> Path:
    path = node.root / "etc-like"
    path.mkdir(mode=0o755)
    (path / "config").write_text("root's\n")
    return path


def job_scratch(node: Node) -> Path:
    return node.scratch / f"slurm-{JOB_ID}"


def as_other(*argv: str) -> None:
    subprocess.run(["setpriv", f"--reuid={OTHER_UID}", f"--regid={OTHER_UID}", "--clear-groups", *argv], check=True)


def owner_mode(path: Path) -> tuple[int, int, int]:
    info = path.lstat()
    return info.st_uid, info.st_gid, info.st_mode & 0o7777


def test_the_job_gets_a_new_directory_of_its_own_with_mode_700(node: Node) -> None:
    result = node.run("prolog")
    assert result.returncode == 0, result.stdout + result.stderr
    assert job_scratch(node).is_dir() and not job_scratch(node).is_symlink()
    assert owner_mode(job_scratch(node)) == (STRANGER_UID, STRANGER_UID, 0o700)
    assert f"health: scratch: made {job_scratch(node)} (mode 700, owner uid {STRANGER_UID})" in result.stdout


def test_a_link_another_user_planted_is_removed_not_followed_and_said(node: Node, root_dir: Path) -> None:
    as_other("ln", "-s", str(root_dir), str(job_scratch(node)))
    result = node.run("prolog")
    assert result.returncode == 0, result.stdout + result.stderr
    assert owner_mode(root_dir) == (0, 0, 0o755) and (root_dir / "config").exists()
    assert not job_scratch(node).is_symlink()
    assert owner_mode(job_scratch(node)) == (STRANGER_UID, STRANGER_UID, 0o700)
    assert f"removing what was at {job_scratch(node)} before the job: a symbolic link of uid {OTHER_UID}" in (
        result.stdout
    )


@pytest.mark.parametrize(
    ("mode", "owner"), [(0o777, 0), (0o775, 0), (0o755, OTHER_UID)], ids=["777", "775", "755-of-a-user"]
)
def test_a_scratch_where_users_may_replace_roots_entries_drains_the_node_and_makes_nothing(
    node: Node, mode: int, owner: int
) -> None:
    """Without the sticky bit (or in a directory of a user's) anyone may rename the new directory away between mkdir
    and chown and put a link there: no scratch, and the node drains with why."""
    os.chown(node.scratch, owner, owner)
    node.scratch.chmod(mode)
    result = node.run("prolog")
    assert result.returncode == 1, result.stdout + result.stderr
    assert not job_scratch(node).exists()
    (call,) = node.drain_calls()
    assert (
        call
        == (
            "update nodename=p5-st-1 state=drain reason=health-prolog: scratch: "
            f"{node.scratch} is not root's, or others may write it without the sticky bit (owner {owner}, mode {mode:o}); "
            "no job scratch"
        )[: len("update nodename=p5-st-1 state=drain reason=") + 200]
    )


@pytest.fixture
def racing_mkdir(node: Node, root_dir: Path) -> Path:
    """A `mkdir` first on the prolog's PATH that lets another user win every race: just before each real mkdir, that
    user puts a link to root's directory at the name again."""
    stand_in = node.root / "bin" / "mkdir"
    stand_in.parent.mkdir()
    stand_in.write_text(
        "#!/bin/bash\n"
        f'setpriv --reuid={OTHER_UID} --regid={OTHER_UID} --clear-groups ln -s {root_dir} "${{@: -1}}"\n'
        'exec /bin/mkdir "$@"\n'
    )
    stand_in.chmod(0o755)
    node.env["PATH"] = f"{stand_in.parent}:{node.env['PATH']}"
    return stand_in


def test_a_user_who_puts_the_entry_back_every_time_gets_the_node_drained_and_root_dir_untouched(
    node: Node, root_dir: Path, racing_mkdir: Path
) -> None:
    result = node.run("prolog")
    assert result.returncode == 1, result.stdout + result.stderr
    assert owner_mode(root_dir) == (0, 0, 0o755) and (root_dir / "config").exists()
    assert result.stdout.count("removing what was at") == 2  # the link put back after attempts 1 and 2
    (call,) = node.drain_calls()
    assert call.endswith(
        f"reason=health-prolog: scratch: {job_scratch(node)} was put back 3 times while the prolog replaced it "
        f"(last: a symbolic link of uid {OTHER_UID})"
    )


@pytest.fixture
def read_only_scratch(node: Node) -> Iterator[Path]:
    """The scratch file system remounted read-only (what the kernel does after disk errors): a real tmpfs."""
    subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(node.scratch)], check=True)
    try:
        yield node.scratch
    finally:
        subprocess.run(["umount", str(node.scratch)], check=True)


def test_a_scratch_that_cannot_take_the_directory_drains_the_node(node: Node, read_only_scratch: Path) -> None:
    result = node.run("prolog")
    assert result.returncode == 1, result.stdout + result.stderr
    (call,) = node.drain_calls()
    assert call.endswith(f"reason=health-prolog: scratch: cannot make {job_scratch(node)}: Read-only file system")


def test_the_epilog_removes_a_link_at_the_scratch_name_and_leaves_its_target(node: Node, root_dir: Path) -> None:
    job_scratch(node).symlink_to(root_dir)
    os.lchown(job_scratch(node), STRANGER_UID, STRANGER_UID)  # the job's user replaced its scratch with the link
    result = node.run("epilog")
    assert result.returncode == 0, result.stdout + result.stderr
    assert not job_scratch(node).is_symlink() and not job_scratch(node).exists()
    assert owner_mode(root_dir) == (0, 0, 0o755) and (root_dir / "config").exists()
    assert f"health: removed {job_scratch(node)}" in result.stdout


@pytest.fixture
def planted_with_a_mount(node: Node) -> Iterator[Path]:
    """A directory another uid planted at the name, with a file system mounted inside (a user may mount FUSE on a
    directory of theirs; here a real tmpfs) holding a file."""
    mount_point = job_scratch(node) / "mnt"
    as_other("mkdir", "-p", str(mount_point))
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount_point)], check=True)
    (mount_point / "data").write_text("on another file system\n")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], check=True)


def test_an_entry_the_prolog_cannot_remove_drains_the_node_and_nothing_is_removed_across_the_mount(
    node: Node, planted_with_a_mount: Path
) -> None:
    result = node.run("prolog")
    assert result.returncode == 1, result.stdout + result.stderr
    assert (planted_with_a_mount / "data").exists()  # rm --one-file-system stays on the scratch's file system
    (call,) = node.drain_calls()
    reason = call.split("reason=", 1)[1]
    assert reason.startswith(
        f"health-prolog: scratch: cannot remove the directory of uid {OTHER_UID} at {job_scratch(node)}: "
        f"skipping '{planted_with_a_mount}', since it's on a different device"
    ), reason
