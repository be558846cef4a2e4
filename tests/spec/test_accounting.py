"""cluster.accounting: defaults, and every cross-field mistake as one line naming the field and its value."""

from __future__ import annotations

from typing import Any

import pytest

from spec import SpecError, load_spec, parse_spec
from tests.cluster.conftest import with_cluster

TEAMS: dict[str, Any] = {
    "enabled": True,
    "qos": [{"name": "small", "max_gpus_per_user": 8, "priority": 10}, {"name": "big", "max_wall_minutes": 2880}],
    "teams": [
        {"name": "research", "members": ["alice", "bob"], "qos": ["big", "small"], "fairshare": 3},
        {"name": "ops", "members": ["carol"], "qos": ["small"]},
    ],
}
# Enforcement off: these cases need no team (with it on, an empty team list is its own mistake).
ON: dict[str, Any] = {"enabled": True, "enforce": False}


def accounting(section: dict[str, Any]) -> dict[str, Any]:
    """The default spec with `section`, and without its cluster.users: these are accounting's own rules (with users
    declared, every member must be one of them: tests/spec/test_users.py)."""

    def edit(cluster: dict[str, Any]) -> None:
        cluster["accounting"] = section
        cluster.update(users=[], groups=[])

    return with_cluster(edit)


def problems(section: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as caught:
        parse_spec(accounting(section))
    return str(caught.value).splitlines()


def test_accounting_is_off_by_default_and_a_full_section_parses() -> None:
    default = load_spec().cluster
    assert default is not None and default.accounting.enabled is False
    cluster = parse_spec(accounting(TEAMS)).cluster
    assert cluster is not None
    parsed = cluster.accounting
    assert [team.name for team in parsed.teams] == ["research", "ops"]
    assert parsed.database.engine == "aurora-serverless-v2"
    assert parsed.database.aurora_capacity == (0.5, 4.0)
    assert parsed.fair_share.enabled is True


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        (
            {**TEAMS, "teams": [{"name": "ops", "qos": ["fast"]}]},
            "spec: cluster.accounting.teams[0].qos[0]: 'fast' is not a defined qos (known: big, normal, small)",
        ),
        (
            {**TEAMS, "teams": [{"name": "root"}]},
            "spec: cluster.accounting.teams[0].name: 'root' is Slurm's own root account; pick another name",
        ),
        (
            {**TEAMS, "teams": [{"name": "ops"}, {"name": "ops"}]},
            "spec: cluster.accounting.teams[1].name: 'ops' is defined twice",
        ),
        (
            {**ON, "qos": [{"name": "a"}, {"name": "a"}]},
            "spec: cluster.accounting.qos[1].name: 'a' is defined twice",
        ),
        (
            {**ON, "qos": [{"name": "a", "max_gpus_per_user": 16, "group_max_gpus": 8}]},
            "spec: cluster.accounting.qos[0].max_gpus_per_user: 16 is above group_max_gpus (8)",
        ),
        (
            {**ON, "teams": [{"name": "ops", "members": ["al", "al"]}]},
            "spec: cluster.accounting.teams[0].members[1]: 'al' is listed twice",
        ),
        (
            {"enabled": False, "teams": [{"name": "ops"}]},
            "spec: cluster.accounting.teams: ['ops'] needs enabled: true (without a database Slurm has no accounts)",
        ),
        (
            {"enabled": True},
            "spec: cluster.accounting.teams: [] is empty while enforce is true: only root could submit jobs (add a "
            "team or enforce: false)",
        ),
        (
            {**TEAMS, "database": {"second_availability_zone": "us-east-1a"}},
            "spec: cluster.accounting.database.second_availability_zone: 'us-east-1a' must differ from "
            "network.availability_zone",
        ),
        (
            {**TEAMS, "database": {"second_availability_zone": "eu-west-1b"}},
            "spec: cluster.accounting.database.second_availability_zone: 'eu-west-1b' is not in the deployment "
            "region us-east-1",
        ),
        (
            {**TEAMS, "database": {"subnet_ids": ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"]}},
            "spec: cluster.accounting.database.subnet_ids: ['subnet-0123456789abcdef0', 'subnet-0123456789abcdef1'] "
            "applies to network.mode existing; the network stack creates them",
        ),
        (
            {**ON, "database": {"engine": "rds-mysql", "min_capacity_acu": 1}},
            "spec: cluster.accounting.database.min_capacity_acu: 1.0 does not apply to engine rds-mysql",
        ),
        (
            {**ON, "database": {"instance_class": "db.r6g.large"}},
            "spec: cluster.accounting.database.instance_class: 'db.r6g.large' does not apply to engine "
            "aurora-serverless-v2",
        ),
        (
            {**ON, "database": {"min_capacity_acu": 0.7}},
            "spec: cluster.accounting.database.min_capacity_acu: 0.7 must be 0.5 to 256 in steps of 0.5",
        ),
        (
            {**ON, "database": {"min_capacity_acu": 8, "max_capacity_acu": 2}},
            "spec: cluster.accounting.database.min_capacity_acu: 8.0 is above max_capacity_acu 2.0",
        ),
    ],
)
def test_cross_field_mistakes_name_the_field_and_value(section: dict[str, Any], expected: str) -> None:
    assert problems(section) == [expected]


@pytest.mark.parametrize(
    ("section", "path"),
    [
        ({**ON, "teams": [{"name": "Research"}]}, "cluster.accounting.teams[0].name: 'Research'"),
        ({**ON, "teams": [{"name": "ops", "members": ["Bob Smith"]}]}, "members[0]: 'Bob Smith'"),
        ({**ON, "qos": [{"name": "a", "max_nodes_per_user": 0}]}, "qos[0].max_nodes_per_user: 0"),
        ({**ON, "database": {"engine": "postgres"}}, "cluster.accounting.database.engine: 'postgres'"),
        ({**ON, "database": {"name": "Slurm-DB"}}, "cluster.accounting.database.name: 'Slurm-DB'"),
        ({**ON, "fair_share": {"weight_qos": -1}}, "cluster.accounting.fair_share.weight_qos: -1"),
        ({**ON, "tems": []}, "cluster.accounting.tems: [] is not a known key"),
    ],
)
def test_bad_single_values_name_the_field(section: dict[str, Any], path: str) -> None:
    lines = problems(section)
    assert len(lines) == 1 and path in lines[0], lines


def test_the_database_subnets_span_two_zones_of_the_region() -> None:
    from spec.model import database_availability_zones

    spec = parse_spec(accounting(TEAMS))
    assert database_availability_zones(spec) == ("us-east-1a", "us-east-1b")
    other = parse_spec(accounting({**TEAMS, "database": {"second_availability_zone": "us-east-1d"}}))
    assert database_availability_zones(other) == ("us-east-1a", "us-east-1d")
