"""Plan a cluster update: `python -m cluster.update_plan OLD.yaml NEW.yaml [--json]`.

Builds both specs' ClusterConfigurations (same example references, so only spec changes show),
classifies every change by ParallelCluster's update policy (cluster.update_policy) and prints the
runbook for the most demanding one. Exit status: 0 with a plan, 2 when a spec is invalid.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from cluster.config_builder import build_cluster_config, cluster_name, example_refs
from cluster.update_policy import Action, Change, Classified, classify, diff_configs
from spec.errors import SpecError
from spec.load import load_spec
from spec.model import DeploymentSpec


@dataclass(frozen=True)
class UpdatePlan:
    changes: list[Classified]
    steps: list[str]

    @property
    def action(self) -> Action:
        return max((c.action for c in self.changes), default=Action.LIVE)


def _stack_level_changes(old: DeploymentSpec, new: DeploymentSpec) -> list[Classified]:
    """Spec fields that live outside ClusterConfiguration (custom resource and stack)."""
    assert old.cluster is not None and new.cluster is not None
    out: list[Classified] = []
    if old.cluster.parallelcluster_version != new.cluster.parallelcluster_version:
        change = Change(
            "cluster.parallelcluster_version",
            old.cluster.parallelcluster_version,
            new.cluster.parallelcluster_version,
            "VERSION",
        )
        out.append(Classified(change, Action.REPLACE, "a cluster keeps the version it was created with"))
    for field in ("deletion_policy", "termination_protection"):
        before, after = getattr(old.cluster, field), getattr(new.cluster, field)
        if before != after:
            change = Change(f"cluster.{field}", before, after, "STACK")
            out.append(Classified(change, Action.LIVE, "a stack-level setting; the stack update applies it"))
    if cluster_name(old) != cluster_name(new):
        change = Change("name", cluster_name(old), cluster_name(new), "CLUSTER_NAME")
        out.append(Classified(change, Action.REPLACE, "a new ClusterName makes CloudFormation replace the cluster"))
    return out


def plan_update(old: DeploymentSpec, new: DeploymentSpec) -> UpdatePlan:
    if old.cluster is None or new.cluster is None:
        raise ValueError("cluster: both specs need a cluster section")
    old_config = build_cluster_config(old, example_refs(old))
    new_config = build_cluster_config(new, example_refs(new))
    classified = [classify(change, old_config, new_config) for change in diff_configs(old_config, new_config)]
    classified += _stack_level_changes(old, new)
    plan = UpdatePlan(classified, [])
    return UpdatePlan(classified, runbook(plan.action, new, bool(classified)))


def runbook(action: Action, spec: DeploymentSpec, any_change: bool) -> list[str]:
    name, region, stack = cluster_name(spec), spec.region, spec.stack_names["cluster"]
    fleet = f"pcluster update-compute-fleet --cluster-name {name} --region {region}"
    deploy = f"cdk deploy {stack} -c spec=NEW.yaml   (CloudFormation updates the cluster through its custom resource)"
    watch = f"pcluster describe-cluster --cluster-name {name} --region {region}   (wait for UPDATE_COMPLETE)"
    if not any_change:
        return ["No cluster change: nothing to do."]
    if action == Action.LIVE:
        return [deploy, watch]
    if action == Action.DRAIN:
        return [
            "Expect affected nodes to drain: running jobs finish, then nodes are replaced (TERMINATE ends them now).",
            deploy,
            watch,
            "On the head node: sinfo -R   (nodes show DRAIN until replaced); squeue to see jobs still running.",
        ]
    if action == Action.STOP:
        return [
            "Let running jobs finish or requeue them (scontrol requeue <jobid>); stopping ends them.",
            f"{fleet} --status STOP_REQUESTED",
            f"pcluster describe-compute-fleet --cluster-name {name} --region {region}   (wait for STOPPED)",
            deploy,
            watch,
            f"{fleet} --status START_REQUESTED",
        ]
    if action == Action.REPLACE:
        return [
            "This change cannot be applied to the running cluster: create a new cluster instead.",
            "Deploy NEW.yaml under a new deployment name (a new cluster stack) and check it with a short job.",
            "Move work over: finish or checkpoint jobs on the old cluster; shared data on FSx stays if its "
            "DeletionPolicy is Retain (mount it in the new cluster by fsx.file_system_id).",
            f"Delete the old cluster: cdk destroy {stack}   (termination protection must be turned off first).",
        ]
    return [
        "Refused: revert the changes marked 'unsupported' (they would lose data or ParallelCluster never "
        "allows them), then plan again."
    ]


def format_plan(plan: UpdatePlan) -> str:
    lines = []
    for item in sorted(plan.changes, key=lambda c: (-c.action, c.change.path)):
        change = item.change
        lines.append(
            f"[{item.action.label:11}] {change.path}: {_short(change.old)} -> {_short(change.new)}"
            f"  ({change.policy}: {item.reason})"
        )
    if not lines:
        lines.append("no changes")
    lines.append("")
    lines.append(f"Update class: {plan.action.label}")
    lines += [f"  {i}. {step}" for i, step in enumerate(plan.steps, 1)]
    return "\n".join(lines)


def _short(value: object) -> str:
    text = json.dumps(value, sort_keys=True, default=str) if value is not None else "(none)"
    return text if len(text) <= 80 else text[:77] + "..."


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Classify the cluster changes between two specs.")
    parser.add_argument("old", help="the deployed spec")
    parser.add_argument("new", help="the spec to deploy")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args(argv)
    try:
        old, new = load_spec(args.old), load_spec(args.new)
        plan = plan_update(old, new)
    except (SpecError, ValueError) as error:
        print(error, file=sys.stderr)
        return 2
    if args.json:
        payload = {
            "action": plan.action.label,
            "steps": plan.steps,
            "changes": [
                {
                    "path": c.change.path,
                    "old": c.change.old,
                    "new": c.change.new,
                    "policy": c.change.policy,
                    "action": c.action.label,
                    "reason": c.reason,
                }
                for c in plan.changes
            ],
        }
        print(json.dumps(payload, indent=2, default=str))
    else:
        print(format_plan(plan))
    return 0


if __name__ == "__main__":
    sys.exit(main())
