"""Enroot's per-user directories on a GPU node (issue 43): what gpu_node.sh lays out and what the prolog makes
(cluster/health/lib.sh health_make_user_dirs), both run for real, against another uid who tries to claim the job
user's directories first (plant an image, a rootfs or a link, or read the cache).

enroot.conf names `<parent>/user-$(id -u)` for its runtime, data, cache and temporary paths. The parents are root's
and mode 755, so no user can create an entry in them; the prolog (root) makes the job user's own directory, mode 700,
without following anything found at its name.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.test_bootstrap import GPU_ARGS, fixture_node, run
from tests.cluster.test_health import STRANGER_UID, Node
from tests.launch.slurm_user import shared_work_dir

JOB_UID = STRANGER_UID  # the job's user
OTHER_UID = STRANGER_UID - 1  # another user of the cluster
ENROOT_KEYS = ("ENROOT_RUNTIME_PATH", "ENROOT_DATA_PATH", "ENROOT_CACHE_PATH", "ENROOT_TEMP_PATH")


class GpuNode(Node):
    """A node root laid out by gpu_node.sh, with the health-check fixtures of test_health.Node beside it."""

    def __init__(self, root: Path) -> None:
        super().__init__(root / "health")
        result = run("gpu_node.sh", GPU_ARGS, fixture_node(root, efa=32, gpus=8))
        assert result.returncode == 0, result.stderr
        self.node_root = root / "root"
        self.env.update(SLURM_JOB_UID=str(JOB_UID), SLURM_JOB_GID=str(JOB_UID))
        self.env["HEALTH_USER_DIRS"] = " ".join(str(path) for path in self.user_dir_parents())

    def health_env(self) -> dict[str, str]:
        lines = (self.node_root / "etc/llm-health/health.env").read_text().splitlines()
        return dict(line.split("=", 1) for line in lines if "=" in line)

    def user_dir_parents(self) -> list[Path]:
        """The parents of enroot's per-user directories, under the fixture's node root."""
        return sorted({path.parent for path in self.enroot_paths(JOB_UID).values()})

    def enroot_paths(self, uid: int) -> dict[str, Path]:
        """enroot.conf's paths as enroot expands them for a process of uid (it evaluates `$(id -u)`)."""
        paths = {}
        for line in (self.node_root / "etc/enroot/enroot.conf").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key in ENROOT_KEYS:
                expanded = as_uid(uid, f'printf "%s" "{value}"').stdout
                paths[key] = self.node_root / expanded.lstrip("/")
        assert set(paths) == set(ENROOT_KEYS), paths
        return paths


def as_uid(uid: int, script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "bash", "-c", script],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def owner_mode(path: Path) -> tuple[int, int, int]:
    info = path.lstat()
    return info.st_uid, info.st_gid, info.st_mode & 0o7777


@pytest.fixture
def node() -> Iterator[GpuNode]:
    """Not under pytest's tmp folder (root's, mode 700): the other uid must reach the node's directories."""
    root = shared_work_dir("enroot-")
    try:
        yield GpuNode(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def root_dir(node: GpuNode) -> Path:
    path = node.root / "etc-like"
    path.mkdir(mode=0o755)
    (path / "config").write_text("root's\n")
    return path


def test_every_enroot_path_is_a_per_user_directory_under_a_parent_the_health_settings_name(node: GpuNode) -> None:
    named = node.health_env().get("HEALTH_USER_DIRS", "").split()
    assert sorted(node.node_root / path.lstrip("/") for path in named) == node.user_dir_parents()
    paths = node.enroot_paths(JOB_UID)
    assert sorted(paths.values()) == sorted(parent / f"user-{JOB_UID}" for parent in node.user_dir_parents())
    assert node.enroot_paths(OTHER_UID)["ENROOT_CACHE_PATH"] != paths["ENROOT_CACHE_PATH"]  # no shared cache


@pytest.mark.parametrize("planting", ["mkdir -m 777", "ln -s /"], ids=["directory", "symlink"])
def test_no_other_user_can_create_the_job_users_enroot_directories_first(node: GpuNode, planting: str) -> None:
    for key, path in node.enroot_paths(JOB_UID).items():
        result = as_uid(OTHER_UID, f"{planting} {path}")
        assert result.returncode != 0, f"uid {OTHER_UID} created {key} of uid {JOB_UID}: {path}"
        assert "Permission denied" in result.stderr, result.stderr
        assert not path.exists() and not path.is_symlink()
    for parent in node.user_dir_parents():
        assert owner_mode(parent) == (0, 0, 0o755), parent


def test_the_prolog_makes_the_job_users_enroot_directories_private_and_writable(node: GpuNode) -> None:
    result = node.run("prolog")
    assert result.returncode == 0, result.stdout + result.stderr
    for key, path in node.enroot_paths(JOB_UID).items():
        assert not path.is_symlink() and path.is_dir(), key
        assert owner_mode(path) == (JOB_UID, JOB_UID, 0o700), key
        assert as_uid(JOB_UID, f"touch {path}/image.sqsh").returncode == 0, key
        assert as_uid(OTHER_UID, f"ls {path}").returncode != 0, key  # nor read: no stealing the cache
    assert f"health: user dirs: made {node.enroot_paths(JOB_UID)['ENROOT_DATA_PATH']} (mode 700" in result.stdout


def test_a_link_found_at_the_job_users_directory_is_replaced_not_followed(node: GpuNode, root_dir: Path) -> None:
    """Left by a node laid out before this change (parents 1777): another user's link to root's directory."""
    data = node.enroot_paths(JOB_UID)["ENROOT_DATA_PATH"]
    data.parent.chmod(0o1777)
    assert as_uid(OTHER_UID, f"ln -s {root_dir} {data}").returncode == 0
    data.parent.chmod(0o755)
    result = node.run("prolog")
    assert result.returncode == 0, result.stdout + result.stderr
    assert owner_mode(root_dir) == (0, 0, 0o755) and (root_dir / "config").read_text() == "root's\n"
    assert not data.is_symlink() and owner_mode(data) == (JOB_UID, JOB_UID, 0o700)
    assert list(data.iterdir()) == []
    assert f"removing what was at {data}: a symbolic link of uid {OTHER_UID}" in result.stdout


def test_a_directory_of_another_owner_is_replaced_and_the_job_users_own_is_kept_across_jobs(node: GpuNode) -> None:
    paths = node.enroot_paths(JOB_UID)
    assert node.run("prolog").returncode == 0
    assert as_uid(JOB_UID, f"touch {paths['ENROOT_DATA_PATH']}/pyxis_named_container").returncode == 0
    shutil.chown(paths["ENROOT_CACHE_PATH"], OTHER_UID, OTHER_UID)  # not the job user's: never handed over
    result = node.run("prolog")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (paths["ENROOT_DATA_PATH"] / "pyxis_named_container").exists()  # pyxis's named containers persist
    assert owner_mode(paths["ENROOT_CACHE_PATH"]) == (JOB_UID, JOB_UID, 0o700)
    assert f"removing what was at {paths['ENROOT_CACHE_PATH']}: a directory of uid {OTHER_UID}" in result.stdout


@pytest.mark.parametrize(("mode", "owner"), [(0o1777, 0), (0o775, 0), (0o755, OTHER_UID)])
def test_a_parent_users_may_write_drains_the_node_and_makes_nothing(node: GpuNode, mode: int, owner: int) -> None:
    parent = node.user_dir_parents()[1]
    parent.chmod(mode)
    shutil.chown(parent, owner, owner)
    result = node.run("prolog")
    assert result.returncode == 1, result.stdout + result.stderr
    assert not (parent / f"user-{JOB_UID}").exists()
    (call,) = node.drain_calls()
    assert f"reason=health-prolog: user dirs: {parent} is not root's, or others may write it (owner {owner}" in call


def test_a_node_that_rebooted_gets_its_runtime_parent_back_root_owned(node: GpuNode) -> None:
    """/run is a tmpfs: after a reboot /run/enroot is gone, and enroot run as the user could not make it."""
    runtime = node.enroot_paths(JOB_UID)["ENROOT_RUNTIME_PATH"]
    runtime.parent.rmdir()
    result = node.run("prolog")
    assert result.returncode == 0, result.stdout + result.stderr
    assert owner_mode(runtime.parent) == (0, 0, 0o755)
    assert owner_mode(runtime) == (JOB_UID, JOB_UID, 0o700)
    assert f"health: user dirs: made {runtime.parent} (root, mode 755)" in result.stdout


def test_a_parent_whose_own_directory_users_may_write_drains_the_node(node: GpuNode) -> None:
    """Whoever may write <enroot dir> may swap a parent for a link between the check and the mkdir."""
    enroot_dir = node.enroot_paths(JOB_UID)["ENROOT_DATA_PATH"].parent.parent
    enroot_dir.chmod(0o1777)
    result = node.run("prolog")
    assert result.returncode == 1, result.stdout + result.stderr
    (call,) = node.drain_calls()
    assert f"reason=health-prolog: user dirs: {enroot_dir} is not root's, or others may write it (owner 0" in call
