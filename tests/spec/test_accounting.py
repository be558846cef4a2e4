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


def accounting(section: dict[str, Any]) -> dict[str, Any]:
    def edit(cluster: dict[str, Any]) -> None:
        cluster["accounting"] = section

    return with_cluster(edit)


def problems(section: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as caught:
        parse_spec(accounting(section))
    return str(caught.value).splitlines()


def test_accounting_is_off_by_default_and_a_full_section_parses() -> None:
    assert load_spec().cluster.accounting.enabled is False
    parsed = parse_spec(accounting(TEAMS)).cluster.accounting
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
            {**TEAMS, "qos": [{"name": "a"}, {"name": "a"}], "teams": []},
            "spec: cluster.accounting.qos[1].name: 'a' is defined twice",
        ),
        (
            {"enabled": True, "qos": [{"name": "a", "max_gpus_per_user": 16, "group_max_gpus": 8}]},
            "spec: cluster.accounting.qos[0].max_gpus_per_user: 16 is above group_max_gpus (8)",
        ),
        (
            {"enabled": True, "teams": [{"name": "ops", "members": ["al", "al"]}]},
            "spec: cluster.accounting.teams[0].members[1]: 'al' is listed twice",
        ),
        (
            {"enabled": False, "teams": [{"name": "ops"}]},
            "spec: cluster.accounting.teams: ['ops'] needs enabled: true (without a database Slurm has no accounts)",
        ),
        (
            {"enabled": True, "database": {"engine": "rds-mysql", "min_capacity_acu": 1}},
            "spec: cluster.accounting.database.min_capacity_acu: 1.0 does not apply to engine rds-mysql",
        ),
        (
            {"enabled": True, "database": {"instance_class": "db.r6g.large"}},
            "spec: cluster.accounting.database.instance_class: 'db.r6g.large' does not apply to engine "
            "aurora-serverless-v2",
        ),
        (
            {"enabled": True, "database": {"min_capacity_acu": 0.7}},
            "spec: cluster.accounting.database.min_capacity_acu: 0.7 must be 0.5 to 256 in steps of 0.5",
        ),
        (
            {"enabled": True, "database": {"min_capacity_acu": 8, "max_capacity_acu": 2}},
            "spec: cluster.accounting.database.min_capacity_acu: 8.0 is above max_capacity_acu 2.0",
        ),
    ],
)
def test_cross_field_mistakes_name_the_field_and_value(section: dict[str, Any], expected: str) -> None:
    assert problems(section) == [expected]


@pytest.mark.parametrize(
    ("section", "path"),
    [
        ({"enabled": True, "teams": [{"name": "Research"}]}, "cluster.accounting.teams[0].name: 'Research'"),
        ({"enabled": True, "teams": [{"name": "ops", "members": ["Bob Smith"]}]}, "members[0]: 'Bob Smith'"),
        ({"enabled": True, "qos": [{"name": "a", "max_nodes_per_user": 0}]}, "qos[0].max_nodes_per_user: 0"),
        ({"enabled": True, "database": {"engine": "postgres"}}, "cluster.accounting.database.engine: 'postgres'"),
        ({"enabled": True, "database": {"name": "Slurm-DB"}}, "cluster.accounting.database.name: 'Slurm-DB'"),
        ({"enabled": True, "fair_share": {"weight_qos": -1}}, "cluster.accounting.fair_share.weight_qos: -1"),
        ({"enabled": True, "tems": []}, "cluster.accounting.tems: [] is not a known key"),
    ],
)
def test_bad_single_values_name_the_field(section: dict[str, Any], path: str) -> None:
    lines = problems(section)
    assert len(lines) == 1 and path in lines[0], lines
