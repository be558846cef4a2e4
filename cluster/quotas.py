"""The EC2 quotas a spec's cluster needs: `python -m cluster.quotas --spec FILE`.

EC2 limits running instances per Region by vCPUs, one Service Quotas quota per instance class, and a new account
starts with 0 vCPUs for P and Trn instances: one p5.48xlarge is 192. This prints, per quota, the vCPUs the
cluster's queues use at max_count (and the head node), with the commands that read the quota and ask for more.
A queue on a Capacity Block is counted by its reservation, not by these quotas; an ODCR queue runs On-Demand
instances and counts like one.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import takewhile

from spec import DeploymentSpec, load_spec
from spec.cli import user_errors
from spec.cluster import QueueSpec
from spec.platform.instances import instance_facts


@dataclass(frozen=True)
class Ec2Quota:
    code: str  # Service Quotas' quota code (service code "ec2")
    name: str


# The On-Demand vCPU quotas of the instance classes the facts table holds (spec/platform/instances.py), by the
# letters that start an instance family. Codes and names as `aws service-quotas list-service-quotas --service-code
# ec2` lists them (read from published listings of that command's output; they are the same in every Region).
ON_DEMAND_QUOTAS: dict[str, Ec2Quota] = {
    "p": Ec2Quota("L-417A185B", "Running On-Demand P instances"),
    "trn": Ec2Quota("L-2C3B7624", "Running On-Demand Trn instances"),
    "standard": Ec2Quota("L-1216C47A", "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"),
}
STANDARD_CLASSES = frozenset("acdhimrtz")
# EC2's limits on Capacity Blocks (EC2 User Guide, "Find and purchase Capacity Blocks").
CAPACITY_BLOCK_LIMITS = "a block holds up to 64 instances, an account up to 256 across blocks"


def quota_for(instance_type: str) -> Ec2Quota:
    """The On-Demand quota an instance type counts against ('p5.48xlarge' -> P)."""
    letters = "".join(takewhile(str.isalpha, instance_facts(instance_type).family))  # 'p5en' -> 'p', 'trn1' -> 'trn'
    if letters in ON_DEMAND_QUOTAS:
        return ON_DEMAND_QUOTAS[letters]
    if letters[0] in STANDARD_CLASSES:
        return ON_DEMAND_QUOTAS["standard"]
    raise KeyError(f"instance type {instance_type!r}: no EC2 quota known for its class {letters!r}")


@dataclass(frozen=True)
class Need:
    quota: Ec2Quota
    vcpus: int
    uses: tuple[str, ...]  # "queue gpu: 2 x p5.48xlarge, 192 each"


def vcpu_needs(spec: DeploymentSpec) -> list[Need]:
    """Per On-Demand quota, the vCPUs of every queue at max_count that is not a Capacity Block, and the head node."""
    if spec.cluster is None:
        return []
    uses = [("head node", 1, spec.cluster.head_node.instance_type)]
    uses += [
        (f"queue {queue.name}", queue.max_count, queue.instance_type)
        for queue in spec.cluster.queues
        if queue.capacity.type != "capacity_block"
    ]
    needs: dict[str, Need] = {}
    for what, count, instance_type in uses:
        quota, vcpus = quota_for(instance_type), instance_facts(instance_type).vcpus
        known = needs.get(quota.code, Need(quota, 0, ()))
        said = f"{what}: {count} x {instance_type}, {vcpus} each"
        needs[quota.code] = Need(quota, known.vcpus + count * vcpus, (*known.uses, said))
    return sorted(needs.values(), key=lambda need: -need.vcpus)


def capacity_blocks(spec: DeploymentSpec) -> list[QueueSpec]:
    return [q for q in (spec.cluster.queues if spec.cluster else []) if q.capacity.type == "capacity_block"]


def commands(need: Need, region: str, profile: str) -> tuple[str, str]:
    """The command that reads the quota's value, and the one that asks for the vCPUs the spec needs."""
    where = f"--service-code ec2 --quota-code {need.quota.code} --profile {profile} --region {region}"
    return (
        f"aws service-quotas get-service-quota {where} --query Quota.Value --output text",
        f"aws service-quotas request-service-quota-increase {where} --desired-value {need.vcpus}",
    )


def report(spec: DeploymentSpec, profile: str) -> list[str]:
    if spec.cluster is None:
        return [f"{spec.name}: the spec has no cluster, so no EC2 quota to check"]
    lines = [f"{spec.name}: EC2 vCPUs at max_count in {spec.region}, compute account {spec.accounts.compute}"]
    for need in vcpu_needs(spec):
        lines.append(f"{need.quota.code} {need.quota.name}: {need.vcpus} vCPUs ({'; '.join(need.uses)})")
        read, ask = commands(need, spec.region, profile)
        lines += [f"  {read}", f"  if below {need.vcpus}: {ask}"]
    for queue in capacity_blocks(spec):
        lines.append(
            f"queue {queue.name}: {queue.max_count} x {queue.instance_type} from Capacity Block "
            f"{queue.capacity.reservation_id}, counted by the block, not by a vCPU quota ({CAPACITY_BLOCK_LIMITS})"
        )
    return lines


@user_errors
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cluster.quotas",
        description="Print the EC2 vCPU quotas the spec's cluster needs at max_count, and the commands to check them.",
    )
    parser.add_argument("--spec", default=None, help="spec file (default: the embedded default spec)")
    parser.add_argument(
        "--profile", default="compute", help="AWS CLI profile of the compute account (default: compute)"
    )
    args = parser.parse_args(argv)
    print("\n".join(report(load_spec(args.spec), args.profile)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
