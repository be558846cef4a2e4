"""The `cluster.accounting:` section: the Slurm accounting database, fair-share and per-team QoS.

One truth for three consumers: the CDK construct that creates the database (stacks/parts/accounting_database),
the ParallelCluster config (SlurmSettings.Database and the slurm.conf settings, cluster/config_builder) and the
sacctmgr commands the head node runs (cluster/accounting). The local cluster (cluster/verify/local_slurm) runs the same
commands against a real slurmdbd. Imports no CDK and no torch.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Annotated, Literal

from pydantic import Field

from spec.errors import SpecProblem
from spec.fields import StrictModel, matches

# Slurm stores account and QoS names in lower case; sacctmgr accepts these characters unquoted.
_SLURM_NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
# POSIX portable user names (useradd's default rule), which is what Slurm matches against the job's uid.
_USER_RE = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
_DB_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")  # ParallelCluster: ^[0-9a-z_]+$, 1-64; MySQL: a letter first
_INSTANCE_CLASS_RE = re.compile(r"^db\.[a-z0-9]+\.[a-z0-9]+$")
_AZ_RE = re.compile(r"^[a-z]{2}(?:-[a-z]+)+-\d[a-z]$")
_SUBNET_RE = re.compile(r"^subnet-[0-9a-f]{8}(?:[0-9a-f]{9})?$")

SlurmName = Annotated[str, matches(_SLURM_NAME_RE, "a Slurm name: lower-case letters, digits, '_' or '-', 1-32")]
UserName = Annotated[str, matches(_USER_RE, "a Linux user name such as alice or ml_ops")]

DatabaseEngine = Literal["aurora-serverless-v2", "rds-mysql"]
# Names Slurm itself reserves: the root account holds the cluster's root association.
RESERVED_ACCOUNTS = frozenset({"root"})
# The QoS every Slurm database starts with; a spec may redefine its limits but must not remove it.
DEFAULT_QOS = "normal"
# A QoS limit is a 32-bit count to sacctmgr; past it the number is no limit Slurm can hold.
SLURM_MAX_LIMIT = 4294967294


class DatabaseSpec(StrictModel):
    """The MySQL database slurmdbd writes to (ParallelCluster's SlurmSettings.Database)."""

    engine: DatabaseEngine = Field(
        default="aurora-serverless-v2",
        description="aurora-serverless-v2: Aurora MySQL Serverless v2 (scales to its minimum when idle); "
        "rds-mysql: one RDS for MySQL instance of instance_class.",
    )
    name: Annotated[str, matches(_DB_NAME_RE, "a database name such as slurm_acct_db")] = Field(
        default="slurm_acct_db", description="DatabaseName slurmdbd creates its tables in."
    )
    user_name: Annotated[str, matches(_USER_RE, "a MySQL user name such as slurm_admin")] = Field(
        default="slurm_admin", description="The database admin user; its password is generated in Secrets Manager."
    )
    min_capacity_acu: float | None = Field(
        default=None, description="aurora-serverless-v2 only: minimum Aurora capacity units (0.5-256, default 0.5)."
    )
    max_capacity_acu: float | None = Field(
        default=None, description="aurora-serverless-v2 only: maximum Aurora capacity units (default 4)."
    )
    instance_class: Annotated[str, matches(_INSTANCE_CLASS_RE, "an RDS class such as db.t4g.medium")] | None = Field(
        default=None, description="rds-mysql only: the DB instance class (default db.t4g.medium)."
    )
    allocated_storage_gib: int | None = Field(
        default=None, ge=20, le=65536, description="rds-mysql only: gp3 storage in GiB (default 20)."
    )
    second_availability_zone: Annotated[str, matches(_AZ_RE, "an availability zone name such as us-east-1b")] | None = (
        Field(
            default=None,
            description="network.mode create: AZ of the database's second subnet (RDS spans two AZs); default: the "
            "region's 'a' zone, or 'b' when network.availability_zone is the 'a' zone.",
        )
    )
    subnet_ids: list[Annotated[str, matches(_SUBNET_RE, "a subnet id such as subnet-0123456789abcdef0")]] | None = (
        Field(
            default=None,
            description="network.mode existing: private subnets in two or more AZs for the database's subnet group.",
        )
    )
    backup_retention_days: int = Field(default=7, ge=1, le=35, description="Automated backups kept this many days.")
    deletion_protection: bool = Field(
        default=True, description="Refuse to delete the database (and keep a final snapshot) with the stack."
    )

    @property
    def aurora_capacity(self) -> tuple[float, float]:
        return (
            0.5 if self.min_capacity_acu is None else self.min_capacity_acu,
            4.0 if self.max_capacity_acu is None else self.max_capacity_acu,
        )

    @property
    def rds_instance_class(self) -> str:
        return self.instance_class or "db.t4g.medium"

    @property
    def rds_storage_gib(self) -> int:
        return self.allocated_storage_gib or 20


class FairShareSpec(StrictModel):
    """Slurm's multifactor priority: who waits least is whoever used least of their share."""

    enabled: bool = Field(default=True, description="PriorityType=priority/multifactor with the weights below.")
    weight_fairshare: int = Field(default=10000, ge=0, le=4294967295, description="PriorityWeightFairshare.")
    weight_age: int = Field(default=1000, ge=0, le=4294967295, description="PriorityWeightAge.")
    weight_job_size: int = Field(default=0, ge=0, le=4294967295, description="PriorityWeightJobSize.")
    weight_qos: int = Field(default=2000, ge=0, le=4294967295, description="PriorityWeightQOS.")
    weight_partition: int = Field(default=0, ge=0, le=4294967295, description="PriorityWeightPartition.")
    decay_half_life_days: int = Field(
        default=7, ge=0, le=365, description="PriorityDecayHalfLife: past usage counts half after this many days."
    )
    max_age_days: int = Field(default=7, ge=1, le=365, description="PriorityMaxAge: the age factor saturates here.")


class QosSpec(StrictModel):
    """One Quality of Service: a priority and limits a team's jobs run under."""

    name: SlurmName
    priority: int = Field(default=0, ge=0, le=4294967295, description="Added through PriorityWeightQOS.")
    max_gpus_per_user: int | None = Field(
        default=None, ge=1, le=SLURM_MAX_LIMIT, description="MaxTRESPerUser=gres/gpu=N."
    )
    max_nodes_per_user: int | None = Field(default=None, ge=1, le=SLURM_MAX_LIMIT, description="MaxTRESPerUser=node=N.")
    group_max_gpus: int | None = Field(
        default=None, ge=1, le=SLURM_MAX_LIMIT, description="GrpTRES=gres/gpu=N: all jobs of the QoS."
    )
    group_max_nodes: int | None = Field(
        default=None, ge=1, le=SLURM_MAX_LIMIT, description="GrpTRES=node=N: all jobs of the QoS."
    )
    max_wall_minutes: int | None = Field(default=None, ge=1, le=525600, description="MaxWall per job.")


class TeamSpec(StrictModel):
    """A Slurm account: its members submit with --account=<name> and share its fair-share."""

    name: SlurmName
    members: list[UserName] = Field(default_factory=list, description="Linux users allowed to charge this account.")
    fairshare: int = Field(default=1, ge=1, le=1000000, description="Shares: this team's part of the cluster.")
    qos: list[SlurmName] = Field(
        default_factory=lambda: [DEFAULT_QOS], min_length=1, description="QoS the team may use; the first is default."
    )
    description: str = Field(default="", max_length=200, pattern=r"^[A-Za-z0-9 _.,:/()-]*$")


class AccountingSpec(StrictModel):
    enabled: bool = Field(
        default=False, description="A MySQL database in the VPC, slurmdbd on the head node, sacct/sreport answer."
    )
    database: DatabaseSpec = Field(default_factory=DatabaseSpec)
    fair_share: FairShareSpec = Field(default_factory=FairShareSpec)
    qos: list[QosSpec] = Field(default_factory=list, description="QoS created (or updated) by sacctmgr.")
    teams: list[TeamSpec] = Field(default_factory=list, description="Accounts and their members.")
    enforce: bool = Field(
        default=True,
        description="AccountingStorageEnforce=associations,limits,qos,safe: jobs need an account and obey its QoS.",
    )


def accounting_problems(accounting: AccountingSpec, path: str = "cluster.accounting") -> Iterator[SpecProblem]:
    """Rules relating the section's fields, each naming the exact field and its value."""
    database = accounting.database
    other = (
        ("instance_class", "allocated_storage_gib")
        if database.engine == "aurora-serverless-v2"
        else ("min_capacity_acu", "max_capacity_acu")
    )
    for name in other:
        value = getattr(database, name)
        if value is not None:
            yield SpecProblem(f"{path}.database.{name}", f"does not apply to engine {database.engine}", value)
    if database.engine == "aurora-serverless-v2":
        low, high = database.aurora_capacity
        for name, value in (("min_capacity_acu", low), ("max_capacity_acu", high)):
            if not 0.5 <= value <= 256 or (value * 2) % 1:
                yield SpecProblem(f"{path}.database.{name}", "must be 0.5 to 256 in steps of 0.5", value)
        if low > high:
            yield SpecProblem(f"{path}.database.min_capacity_acu", f"is above max_capacity_acu {high}", low)
    if not accounting.enabled:
        for name in ("qos", "teams"):
            if getattr(accounting, name):
                yield SpecProblem(
                    f"{path}.{name}",
                    "needs enabled: true (without a database Slurm has no accounts)",
                    [item.name for item in getattr(accounting, name)],
                )
    if accounting.enabled and accounting.enforce and not accounting.teams:
        yield SpecProblem(
            f"{path}.teams",
            "is empty while enforce is true: only root could submit jobs (add a team or enforce: false)",
            [],
        )
    seen_qos: set[str] = set()
    for index, qos in enumerate(accounting.qos):
        where = f"{path}.qos[{index}]"
        if qos.name in seen_qos:
            yield SpecProblem(f"{where}.name", "is defined twice", qos.name)
        seen_qos.add(qos.name)
        for user, group, what in (
            (qos.max_gpus_per_user, qos.group_max_gpus, "gpus"),
            (qos.max_nodes_per_user, qos.group_max_nodes, "nodes"),
        ):
            if user is not None and group is not None and user > group:
                yield SpecProblem(f"{where}.max_{what}_per_user", f"is above group_max_{what} ({group})", user)
    known = {DEFAULT_QOS, *seen_qos}
    seen_teams: set[str] = set()
    for index, team in enumerate(accounting.teams):
        where = f"{path}.teams[{index}]"
        if team.name in RESERVED_ACCOUNTS:
            yield SpecProblem(f"{where}.name", "is Slurm's own root account; pick another name", team.name)
        if team.name in seen_teams:
            yield SpecProblem(f"{where}.name", "is defined twice", team.name)
        seen_teams.add(team.name)
        for qos_index, qos_name in enumerate(team.qos):
            if qos_name not in known:
                yield SpecProblem(
                    f"{where}.qos[{qos_index}]", f"is not a defined qos (known: {', '.join(sorted(known))})", qos_name
                )
        for member_index, member in enumerate(team.members):
            if member in team.members[:member_index]:
                yield SpecProblem(f"{where}.members[{member_index}]", "is listed twice", member)
