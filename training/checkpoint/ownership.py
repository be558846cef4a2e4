"""Who may have written a run directory or a checkpoint: only the job's own user, or a group the job's user is in.

A checkpoint is code as much as data: DCP's `.metadata` is a pickle, and a directory another user can write may
hold a "committed" step planted there (issue 43). So before the trainer writes into or loads from a path, every
directory and file on the way is checked (`refusal`): its owner is the job's uid, or its group is one of the job's
groups (a project directory shared by a group); and nobody outside those may write it (no write for others, and
group write only for one of the job's groups). A directory only its owner (and group) may write cannot gain a
planted entry later, so what was checked stays what is loaded.

Stdlib only: `llm-submit` and the job scripts use it without torch.
"""

from __future__ import annotations

import argparse
import grp
import os
import pwd
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

# The run-directory layout the docs give: each user's runs under their own directory (docs/jobs.md).
RUNS_LAYOUT = "/fsx/runs/<user>/<run>"
# What llm-submit creates run directories with: the owner writes, the group reads, others nothing.
RUN_DIR_UMASK = 0o027


class NotOwnedError(RuntimeError):
    """A run directory or checkpoint the job's user did not write; the message is one line naming it."""


@dataclass(frozen=True)
class Identity:
    """The user a job runs as: its uid and every group it is in (the primary and the supplementary ones)."""

    uid: int
    gids: frozenset[int]

    @classmethod
    def of_this_process(cls) -> Identity:
        return cls(os.geteuid(), frozenset({os.getegid(), *os.getgroups()}))

    def user_name(self) -> str:
        return _user_name(self.uid)


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def refusal(path: Path, identity: Identity, what: str = "") -> str | None:
    """Why `path` (its own inode: a link is followed to what it names) may hold what another user wrote, in one
    line, or None when only the job's user or its groups can have written it. `what` names it in the message."""
    info = os.stat(path)
    mode = stat.S_IMODE(info.st_mode)
    owner = f"{_user_name(info.st_uid)}:{_group_name(info.st_gid)} (mode {mode:04o})"
    name = f"{what} {path}" if what else str(path)
    ours = info.st_uid == identity.uid
    our_group = info.st_gid in identity.gids
    if not ours and not our_group:
        return (
            f"{name} is owned by {owner}, not by this job's user {identity.user_name()} or one of its groups: "
            f"use a run directory of your own ({RUNS_LAYOUT})"
        )
    if mode & stat.S_IWOTH:
        return f"{name} is writable by every user: owned by {owner}; take the others' write away (chmod o-w)"
    if mode & stat.S_IWGRP and not our_group:
        return (
            f"{name} is writable by group {_group_name(info.st_gid)}, which this job's user "
            f"{identity.user_name()} is not in: owned by {owner}; take the group's write away (chmod g-w)"
        )
    return None


def check(path: Path, what: str = "", identity: Identity | None = None) -> None:
    """Raise NotOwnedError when `path` may hold what another user wrote (see `refusal`)."""
    reason = refusal(path, identity or Identity.of_this_process(), what)
    if reason is not None:
        raise NotOwnedError(reason)


def check_tree(path: Path, what: str = "", identity: Identity | None = None) -> None:
    """`check` on `path` and on every directory and file under it (a checkpoint step: each file it loads)."""
    identity = identity or Identity.of_this_process()
    check(path, what, identity)
    for directory, subdirectories, files in os.walk(path):
        for entry in sorted([*subdirectories, *files]):
            check(Path(directory) / entry, what, identity)


def check_if_present(path: Path, what: str = "", identity: Identity | None = None) -> None:
    """`check` on a directory the caller will create when it is missing (then it is the job user's own)."""
    if path.exists():
        check(path, what, identity)


def main(argv: list[str] | None = None) -> int:
    """`python training/checkpoint/ownership.py --run-dir DIR` (by path, as the job scripts run it): exit 0 when this
    process's user may use DIR (or DIR does not exist yet), else 1 with the reason on stdout in one line."""
    parser = argparse.ArgumentParser(prog="ownership.py", description=main.__doc__)
    parser.add_argument("--run-dir", required=True, type=Path)
    args = parser.parse_args(argv)
    try:
        check_if_present(args.run_dir, "--run-dir")
    except NotOwnedError as refused:
        print(refused)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
