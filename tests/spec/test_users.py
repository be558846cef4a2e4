"""cluster.users and cluster.groups (issue 43): the accounts every node creates, through the spec's own loader; every
mistake is one line naming the field and its value."""

from __future__ import annotations

from typing import Any

import pytest

from spec import SpecError, load_spec, parse_spec
from tests.cluster.conftest import with_cluster

GROUPS: list[dict[str, Any]] = [{"name": "pretraining", "gid": 2001}, {"name": "research", "gid": 2002}]
USERS: list[dict[str, Any]] = [
    {"name": "alice", "uid": 2101, "group": "pretraining", "admin": True},
    {"name": "bob", "uid": 2102, "group": "research", "groups": ["pretraining"]},
]


def people(users: list[dict[str, Any]], groups: list[dict[str, Any]] = GROUPS, **cluster_keys: Any) -> dict[str, Any]:
    def edit(cluster: dict[str, Any]) -> None:
        cluster.update(users=users, groups=groups, **cluster_keys)

    return with_cluster(edit)


def problems(users: list[dict[str, Any]], groups: list[dict[str, Any]] = GROUPS, **cluster_keys: Any) -> list[str]:
    with pytest.raises(SpecError) as caught:
        parse_spec(people(users, groups, **cluster_keys))
    return str(caught.value).splitlines()


def test_the_default_deployment_declares_an_admin_and_a_researcher_each_in_a_group_of_their_own() -> None:
    """README's connect step logs in as one's own account: the default spec has people to log in as. The admin alone
    gets sudo; the researcher is a plain member of the research group."""
    default = load_spec().cluster
    assert default is not None
    people = [(user.name, user.group, user.groups, user.admin) for user in default.users]
    assert people == [("alice", "platform", [], True), ("bob", "research", [], False)]
    assert [group.name for group in default.groups] == ["platform", "research"]


def test_a_full_section_parses() -> None:
    cluster = parse_spec(people(USERS)).cluster
    assert cluster is not None
    alice, bob = cluster.users
    assert (alice.name, alice.uid, alice.group, alice.groups, alice.admin) == ("alice", 2101, "pretraining", [], True)
    assert (bob.group, bob.groups, bob.admin) == ("research", ["pretraining"], False)
    assert [(group.name, group.gid) for group in cluster.groups] == [("pretraining", 2001), ("research", 2002)]


@pytest.mark.parametrize(
    ("users", "groups", "expected"),
    [
        (
            [*USERS, {"name": "alice", "uid": 2103, "group": "research"}],
            GROUPS,
            "spec: cluster.users[2].name: 'alice' is declared twice",
        ),
        (
            [*USERS, {"name": "carol", "uid": 2101, "group": "research"}],
            GROUPS,
            "spec: cluster.users[2].uid: 2101 is alice's uid already",
        ),
        (
            USERS,
            [*GROUPS, {"name": "ops", "gid": 2001}],
            "spec: cluster.groups[2].gid: 2001 is group pretraining's gid already",
        ),
        (
            USERS,
            [*GROUPS, {"name": "research", "gid": 2003}],
            "spec: cluster.groups[2].name: 'research' is declared twice",
        ),
        (
            [{"name": "carol", "uid": 500, "group": "research"}],
            GROUPS,
            "spec: cluster.users[0].uid: 500 is reserved for system accounts (below 1000); users take 1001 to 59999",
        ),
        (
            [{"name": "carol", "uid": 1000, "group": "research"}],
            GROUPS,
            "spec: cluster.users[0].uid: 1000 is the AMI's default user (ec2-user, ubuntu); users take 1001 to 59999",
        ),
        (
            [{"name": "carol", "uid": 65534, "group": "research"}],
            GROUPS,
            "spec: cluster.users[0].uid: 65534 is above 59999 (nobody, and the uids systemd allocates); "
            "users take 1001 to 59999",
        ),
        (
            USERS,
            [{"name": "pretraining", "gid": 999}, GROUPS[1]],
            "spec: cluster.groups[0].gid: 999 is reserved for system accounts (below 1000); groups take 1001 to 59999",
        ),
        (
            [{"name": "carol", "uid": 2103, "group": "ops"}],
            GROUPS,
            "spec: cluster.users[0].group: 'ops' is not a declared group (declared: pretraining, research)",
        ),
        (
            [{"name": "carol", "uid": 2103, "group": "research", "groups": ["research", "ops"]}],
            GROUPS,
            "spec: cluster.users[0].groups[1]: 'ops' is not a declared group (declared: pretraining, research)",
        ),
        (
            [{"name": "carol", "uid": 2103, "group": "research", "groups": ["pretraining", "pretraining"]}],
            GROUPS,
            "spec: cluster.users[0].groups[1]: 'pretraining' is listed twice",
        ),
        (
            [{"name": "ec2-user", "uid": 2103, "group": "research"}],
            GROUPS,
            "spec: cluster.users[0].name: 'ec2-user' is an account of the AMI or ParallelCluster; pick another name",
        ),
        (
            USERS,
            [*GROUPS, {"name": "wheel", "gid": 2003}],
            "spec: cluster.groups[2].name: 'wheel' is a group of the AMI or ParallelCluster; pick another name",
        ),
        (
            [{"name": "carol", "uid": 2103, "group": "research", "shell": "/bin/zsh"}],
            GROUPS,
            "spec: cluster.users[0].shell: '/bin/zsh' is not a known key (misspelled?)",
        ),
    ],
    ids=[
        "duplicate-name", "duplicate-uid", "duplicate-gid", "duplicate-group", "system-uid", "default-user-uid",
        "uid-too-high", "system-gid", "unknown-primary-group", "unknown-extra-group", "group-twice", "ami-user", "ami-group",
        "unknown-key",
    ],
)  # fmt: skip
def test_every_mistake_is_one_line_naming_the_field_and_the_value(
    users: list[dict[str, Any]], groups: list[dict[str, Any]], expected: str
) -> None:
    assert expected in problems(users, groups)


def test_a_user_without_groups_needs_groups_declared() -> None:
    assert problems([USERS[1]], []) == [
        "spec: cluster.users[0].group: 'research' is not a declared group (declared: none)",
        "spec: cluster.users[0].groups[0]: 'pretraining' is not a declared group (declared: none)",
    ]


ACCOUNTING: dict[str, Any] = {
    "enabled": True,
    "teams": [{"name": "pretraining", "members": ["alice", "bob"]}, {"name": "research", "members": ["bob"]}],
}


def test_with_users_declared_every_team_member_is_one_of_them_and_every_user_in_a_team() -> None:
    cluster = parse_spec(people(USERS, accounting=ACCOUNTING)).cluster
    assert cluster is not None and cluster.accounting.teams[0].members == ["alice", "bob"]
    teams = [{"name": "pretraining", "members": ["alice", "ec2-user"]}]
    assert problems(USERS, accounting={"enabled": True, "teams": teams}) == [
        "spec: cluster.accounting.teams[0].members[1]: 'ec2-user' is not a user of cluster.users "
        "(declared: alice, bob)",
        "spec: cluster.users[1].name: 'bob' is in no team of cluster.accounting: with enforce on, Slurm refuses "
        "their jobs (add them to a team's members)",
    ]


def test_without_users_declared_team_members_are_the_clusters_own_business() -> None:
    spec = parse_spec(people([], [], accounting={"enabled": True, "teams": [{"name": "t", "members": ["x"]}]}))
    cluster = spec.cluster
    assert cluster is not None and cluster.users == []
