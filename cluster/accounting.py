"""Slurm accounting from the spec: slurm.conf settings and the sacctmgr script that creates QoS, accounts, users.

`slurm_conf_settings` goes into ParallelCluster's SlurmSettings.CustomSlurmSettings (cluster/config_builder) and
into the local cluster's slurm.conf (cluster/verify/local_slurm), so both run the same settings. `sacctmgr_script` is
a bash script the head node runs once slurmdbd answers (cluster/bootstrap/head_node.sh, from the payload); it
converges the database on the spec and may run any number of times: it adds what is missing and sets every
limit to the spec's value (a limit the spec drops is cleared), and never removes accounts, users or QoS
(running jobs may still charge them).

    python -m cluster.accounting [SPEC.yaml] [--settings]

prints the script (or, with --settings, the slurm.conf lines) for a spec.
"""

from __future__ import annotations

import shlex

from spec.accounting import AccountingSpec, FairShareSpec, QosSpec
from spec.cli import OneLineParser, user_errors
from spec.errors import UserError
from spec.load import load_spec

ENFORCE = "associations,limits,qos,safe"
# Slurm's "no limit" for a TRES count, a wall time or a priority when modifying an existing entity.
CLEAR = "-1"


def slurm_conf_settings(accounting: AccountingSpec) -> list[tuple[str, str]]:
    """slurm.conf (key, value) pairs; none of them is on ParallelCluster's deny-list (tested with its code)."""
    if not accounting.enabled:
        return []
    settings: list[tuple[str, str]] = [
        # GPUs become a tracked resource, so QoS limits on gres/gpu and sacct's AllocTRES see them.
        ("AccountingStorageTRES", "gres/gpu"),
        # The job's comment carries its plan (launch.submit --plan): llm-report reads it back from sacct.
        ("AccountingStoreFlags", "job_comment"),
    ]
    if accounting.enforce:
        settings.append(("AccountingStorageEnforce", ENFORCE))
    settings += _priority(accounting.fair_share)
    return settings


def _priority(fair_share: FairShareSpec) -> list[tuple[str, str]]:
    if not fair_share.enabled:
        return [("PriorityType", "priority/basic")]
    return [
        ("PriorityType", "priority/multifactor"),
        ("PriorityWeightFairshare", str(fair_share.weight_fairshare)),
        ("PriorityWeightAge", str(fair_share.weight_age)),
        ("PriorityWeightJobSize", str(fair_share.weight_job_size)),
        ("PriorityWeightQOS", str(fair_share.weight_qos)),
        ("PriorityWeightPartition", str(fair_share.weight_partition)),
        ("PriorityDecayHalfLife", f"{fair_share.decay_half_life_days}-0"),
        ("PriorityMaxAge", f"{fair_share.max_age_days}-0"),
    ]


def _tres(gpus: int | None, nodes: int | None) -> str:
    return f"gres/gpu={CLEAR if gpus is None else gpus},node={CLEAR if nodes is None else nodes}"


def qos_settings(qos: QosSpec) -> list[str]:
    """`set` arguments of `sacctmgr modify qos`: every limit, cleared where the spec has none."""
    return [
        f"Priority={qos.priority}",
        f"MaxTRESPerUser={_tres(qos.max_gpus_per_user, qos.max_nodes_per_user)}",
        f"GrpTRES={_tres(qos.group_max_gpus, qos.group_max_nodes)}",
        f"MaxWall={CLEAR if qos.max_wall_minutes is None else qos.max_wall_minutes}",
    ]


_PRELUDE = """\
#!/bin/bash
# Rendered by cluster.accounting from the spec's cluster.accounting: QoS, accounts (teams) and their users.
# Idempotent: adds what is missing, sets every limit to the spec's value; removes nothing.
set -euo pipefail
cluster="${SLURM_CLUSTER:-$(scontrol show config | awk '$1 == "ClusterName" {print $3}')}"
[[ -n "$cluster" ]] || { echo "sacctmgr script: cannot read ClusterName from scontrol" >&2; exit 1; }
log() { echo "accounting: $*" >&2; }
exists() { [[ -n "$(sacctmgr --noheader --parsable2 show "$@" 2>/dev/null)" ]]; }
if ! exists cluster "$cluster" format=cluster; then
	log "adding cluster $cluster"
	sacctmgr -i add cluster "$cluster" >/dev/null
fi
"""


def sacctmgr_script(accounting: AccountingSpec) -> str:
    """A bash script converging the accounting database on the spec (needs sacctmgr, scontrol, slurmdbd up)."""
    if not accounting.enabled:
        raise ValueError("cluster.accounting.enabled: False, there is no accounting database to configure")
    lines = [_PRELUDE]
    for qos in accounting.qos:
        name = shlex.quote(qos.name)
        lines += [
            f"exists qos {name} format=name || {{ log 'adding qos {qos.name}'; sacctmgr -i add qos {name} >/dev/null; }}",
            f"sacctmgr -i modify qos where name={name} set {' '.join(qos_settings(qos))} >/dev/null",
        ]
    for team in accounting.teams:
        name = shlex.quote(team.name)
        team_qos = ",".join(team.qos)
        description = shlex.quote(team.description or f"team {team.name}")
        lines += [
            f'exists account {name} cluster="$cluster" format=account withassoc || '
            f"{{ log 'adding account {team.name}'; "
            f'sacctmgr -i add account {name} cluster="$cluster" description={description} '
            f"organization={name} >/dev/null; }}",
            f'sacctmgr -i modify account where name={name} cluster="$cluster" set '
            f"fairshare={team.fairshare} qos={team_qos} defaultqos={team.qos[0]} description={description} >/dev/null",
        ]
        for member in team.members:
            user = shlex.quote(member)
            lines += [
                f'exists assoc where cluster="$cluster" account={name} user={user} format=user || '
                f"{{ log 'adding user {member} to {team.name}'; "
                f'sacctmgr -i add user {user} account={name} cluster="$cluster" >/dev/null; }}',
                # Each user association carries the team's QoS list (a user added earlier keeps an old copy).
                f'sacctmgr -i modify user where name={user} account={name} cluster="$cluster" set '
                f"qos={team_qos} defaultqos={team.qos[0]} >/dev/null",
            ]
    lines.append('log "accounts, users and QoS match the spec on cluster $cluster"')
    return "\n".join(lines) + "\n"


@user_errors
def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(
        prog="python -m cluster.accounting", description="The sacctmgr script (or slurm.conf lines) for a spec."
    )
    parser.add_argument("spec", nargs="?", help="deployment spec YAML (default: spec/default.yaml)")
    parser.add_argument("--settings", action="store_true", help="print the slurm.conf settings instead")
    args = parser.parse_args(argv)
    spec = load_spec(args.spec)
    if spec.cluster is None or not spec.cluster.accounting.enabled:
        raise UserError("cluster.accounting.enabled: the spec has no accounting database")
    accounting = spec.cluster.accounting
    if args.settings:
        print("\n".join(f"{key}={value}" for key, value in slurm_conf_settings(accounting)))
    else:
        print(sacctmgr_script(accounting), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
