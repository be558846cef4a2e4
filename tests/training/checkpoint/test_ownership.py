"""The ownership rules: what the job's user may load from or write into (issue 43, attack 3)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from training.checkpoint.ownership import Identity, NotOwnedError, check, check_if_present, check_tree, refusal

NOBODY = 65534
ME = Identity.of_this_process()
# Files of another user: made by chown, which only root may do.
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


def _owned(path: Path, mode: int, uid: int | None = None, gid: int | None = None) -> Path:
    if not path.exists():
        path.mkdir() if path.suffix == "" else path.write_bytes(b"x")
    path.chmod(mode)
    os.chown(path, ME.uid if uid is None else uid, -1 if gid is None else gid)
    return path


def _stranger(gids: frozenset[int] = frozenset({4242})) -> Identity:
    """A job user that is not the file's owner (uid 4241, unused here)."""
    return Identity(4241, gids)


def test_the_job_users_own_directory_and_files_pass(tmp_path: Path) -> None:
    run = _owned(tmp_path / "run", 0o750)
    _owned(run / "file.pt", 0o640)
    check_tree(run)
    assert refusal(run, ME) is None


def test_a_directory_of_another_user_is_refused_with_its_owner_and_mode(tmp_path: Path) -> None:
    run = _owned(tmp_path / "run", 0o755, uid=NOBODY, gid=NOBODY)
    assert refusal(run, Identity(0, frozenset({0}))) == (
        f"{run} is owned by nobody:nogroup (mode 0755), not by this job's user root or one of its groups: use a run "
        "directory of your own (/fsx/runs/<user>/<run>)"
    )
    with pytest.raises(NotOwnedError, match=r"^--run-dir: .* is owned by nobody:nogroup \(mode 0755\)"):
        check(run, "--run-dir:", Identity(0, frozenset({0})))


def test_a_group_shared_project_directory_passes_for_the_groups_members_only(tmp_path: Path) -> None:
    project = _owned(tmp_path / "project", 0o2770, gid=4242)  # another member's, group-writable, setgid
    assert refusal(project, _stranger(frozenset({4242}))) is None
    assert "not by this job's user" in (refusal(project, _stranger(frozenset({4343}))) or "")


def test_write_for_every_user_is_refused_even_on_the_users_own_directory(tmp_path: Path) -> None:
    run = _owned(tmp_path / "run", 0o1777)
    assert refusal(run, ME) == (
        f"{run} is writable by every user: owned by root:root (mode 1777); take the others' write away (chmod o-w)"
    )


def test_group_write_is_refused_when_the_group_is_not_one_of_the_job_users(tmp_path: Path) -> None:
    run = _owned(tmp_path / "run", 0o770, gid=4242)
    reason = refusal(run, Identity(ME.uid, frozenset({0})))
    assert reason is not None and "is writable by group 4242, which this job's user root is not in" in reason


def test_one_planted_file_deep_in_a_checkpoint_is_named(tmp_path: Path) -> None:
    step = _owned(tmp_path / "step-10", 0o750)
    rng = _owned(step / "rng", 0o750)
    _owned(step / ".metadata", 0o640)
    planted = _owned(rng / "rank1.pt", 0o644, uid=NOBODY, gid=NOBODY)
    with pytest.raises(NotOwnedError) as refused:
        check_tree(step, "checkpoint")
    assert str(refused.value).startswith(f"checkpoint {planted} is owned by nobody:nogroup (mode 0644)")


def test_a_link_is_judged_by_what_it_names(tmp_path: Path) -> None:
    foreign = _owned(tmp_path / "foreign", 0o755, uid=NOBODY, gid=NOBODY)
    link = tmp_path / "link"
    link.symlink_to(foreign)
    with pytest.raises(NotOwnedError, match="owned by nobody"):
        check(link)


def test_a_missing_directory_passes_it_will_be_the_job_users_own(tmp_path: Path) -> None:
    check_if_present(tmp_path / "new-run")
