"""The `cluster.users:` and `cluster.groups:` sections: the people of a shared cluster, as Linux accounts.

One truth for every node: the head node and each compute node create the same accounts with the same uid and gid at
bootstrap (cluster/users.py renders the script), so ownership on the shared file system means the same person
everywhere; admins alone get sudo; with accounting on, the Slurm users are these users. Imports no CDK and no torch.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from pydantic import Field

from spec.accounting import AccountingSpec, UserName
from spec.errors import SpecProblem
from spec.fields import StrictModel

# Below 1000: system accounts (the AMI's, ParallelCluster's slurm and munge, 400-401). 1000: the AMI's default user.
# From 60000: nobody (65534) and the ranges systemd allocates (61184-65519).
FIRST_ID = 1001
LAST_ID = 59999
# Session Manager's run-as default (policies/operator.py): an account no node has, so a session from a principal
# without the SSMSessionRunAs tag fails instead of running as anyone.
UNTAGGED_SESSION_USER = "untagged-principal"
# Accounts the AMI, its agents or ParallelCluster create: a spec user of that name would take them over.
RESERVED_USERS = frozenset(
    {"root", "ec2-user", "ubuntu", "rocky", "ssm-user", "slurm", "munge", "pcluster-admin", "nobody", "dcv", "mysql"}
    | {UNTAGGED_SESSION_USER}
)
RESERVED_GROUPS = frozenset(
    {*RESERVED_USERS, "wheel", "sudo", "adm", "admin", "users", "nogroup", "docker", "systemd-journal"}
)


class GroupSpec(StrictModel):
    """A Linux group: a project's members share its run directories (chmod 2770) and, later, its datasets."""

    name: UserName
    gid: int = Field(description="The same on every node, so group ownership on /fsx holds everywhere.")


class UserSpec(StrictModel):
    """A person's Linux account on every node, and the identity their jobs, files and Slurm usage carry."""

    name: UserName = Field(description="The login name: Session Manager's run-as user and the Slurm user.")
    uid: int = Field(description="The same on every node (1001 to 59999), so ownership on /fsx holds everywhere.")
    group: UserName = Field(description="Primary group: one of cluster.groups.")
    groups: list[UserName] = Field(default_factory=list, description="Further groups, each one of cluster.groups.")
    admin: bool = Field(default=False, description="sudo on every node (/etc/sudoers.d/90-llm-admins); no one else.")


def _id_problem(value: int, what: str) -> str | None:
    room = f"{what}s take {FIRST_ID} to {LAST_ID}"
    if value < 1000:
        return f"is reserved for system accounts (below 1000); {room}"
    if value == 1000:
        return f"is the AMI's default user (ec2-user, ubuntu); {room}"
    if value > LAST_ID:
        return f"is above {LAST_ID} (nobody, and the uids systemd allocates); {room}"
    return None


def users_problems(
    users: list[UserSpec], groups: list[GroupSpec], accounting: AccountingSpec, path: str = "cluster"
) -> Iterator[SpecProblem]:
    """Rules over cluster.users, cluster.groups and the accounting teams, each naming the field and its value."""
    yield from _names_and_ids(groups, f"{path}.groups", "gid", "a group", RESERVED_GROUPS, "group {}'s")
    declared = sorted({group.name for group in groups})
    known = f"(declared: {', '.join(declared) or 'none'})"
    yield from _names_and_ids(users, f"{path}.users", "uid", "an account", RESERVED_USERS, "{}'s")
    for index, user in enumerate(users):
        where = f"{path}.users[{index}]"
        if user.group not in declared:
            yield SpecProblem(f"{where}.group", f"is not a declared group {known}", user.group)
        for group_index, name in enumerate(user.groups):
            if name not in declared:
                yield SpecProblem(f"{where}.groups[{group_index}]", f"is not a declared group {known}", name)
            elif name in user.groups[:group_index]:
                yield SpecProblem(f"{where}.groups[{group_index}]", "is listed twice", name)
    if users and accounting.enabled:
        yield from _team_members(users, accounting, path)


def _names_and_ids(
    entries: Sequence[UserSpec | GroupSpec],
    path: str,
    id_field: str,
    noun: str,
    reserved: frozenset[str],
    owner: str,
) -> Iterator[SpecProblem]:
    """Each name not reserved and declared once; each id in range and held once (`owner` names its first holder)."""
    holders: dict[int, str] = {}
    kind = "group" if id_field == "gid" else "user"
    for index, entry in enumerate(entries):
        where = f"{path}[{index}]"
        if entry.name in reserved:
            yield SpecProblem(
                f"{where}.name", f"is {noun} of the AMI or ParallelCluster; pick another name", entry.name
            )
        if any(other.name == entry.name for other in entries[:index]):
            yield SpecProblem(f"{where}.name", "is declared twice", entry.name)
        value: int = getattr(entry, id_field)
        if (problem := _id_problem(value, kind)) is not None:
            yield SpecProblem(f"{where}.{id_field}", problem, value)
        elif value in holders:
            yield SpecProblem(f"{where}.{id_field}", f"is {owner.format(holders[value])} {id_field} already", value)
        holders.setdefault(value, entry.name)


def _team_members(users: list[UserSpec], accounting: AccountingSpec, path: str) -> Iterator[SpecProblem]:
    """With users declared, the Slurm users are those users: no member Linux does not know, no user Slurm refuses."""
    names = [user.name for user in users]
    for team_index, team in enumerate(accounting.teams):
        for member_index, member in enumerate(team.members):
            if member not in names:
                yield SpecProblem(
                    f"{path}.accounting.teams[{team_index}].members[{member_index}]",
                    f"is not a user of {path}.users (declared: {', '.join(names)})",
                    member,
                )
    if accounting.enforce:
        members = {member for team in accounting.teams for member in team.members}
        for index, user in enumerate(users):
            if user.name not in members:
                yield SpecProblem(
                    f"{path}.users[{index}].name",
                    "is in no team of cluster.accounting: with enforce on, Slurm refuses their jobs (add them to a "
                    "team's members)",
                    user.name,
                )
