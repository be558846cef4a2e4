"""Plan a cluster update: `python -m cluster.update_plan OLD.yaml NEW.yaml [--json]`
or, between two synthesized checkouts, `... OLD.yaml NEW.yaml --old-cdk-out DIR --new-cdk-out DIR`.

Builds both ClusterConfigurations from the references the cluster stack really passes: the bootstrap
scripts' and the payload's S3 URIs as CDK computes them (its own FileSystem.fingerprint of the same
files, in the CDK bootstrap bucket), so a spec change that changes the payload shows as the change it is.
With two cloud assemblies it reads both configs from their templates instead (a code change between two
checkouts). Every change is classified by ParallelCluster's update policy (cluster.update_policy) and
the runbook for the most demanding one is printed. Exit status: 0 with a plan, 2 when a spec is invalid.

A training-code change reaches the head node through OnNodeUpdated (SUPPORTED: a live update that
re-runs head_node.sh); a change of head_node.sh itself changes OnNodeConfigured, which ParallelCluster
never updates: a new cluster.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster.config_builder import ClusterRefs, build_cluster_config, cluster_name, example_refs
from cluster.payload import build_payload, deployment_yaml
from cluster.update_policy import Action, Change, Classified, classify, diff_configs
from spec.cli import OneLineParser, user_errors
from spec.errors import UserError
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


REPO = Path(__file__).resolve().parents[1]
BOOTSTRAP = REPO / "cluster" / "bootstrap"
# CDK's default bootstrap qualifier (cdk.json sets none): assets land in cdk-<qualifier>-assets-<account>-<region>.
CDK_QUALIFIER = "hnb659fds"


def quiet_node_banners() -> None:
    """jsii's Node process prints a banner when Node is deprecated or end-of-life, which jsii's Python side shows
    line by line as byte strings (b'!!  Node 20 is end-of-life ...'). The Makefile silences both with these
    variables; this does the same for a plan run by hand (a value the user set is kept)."""
    os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
    try:
        version = subprocess.run(
            [os.environ.get("JSII_NODE", "node"), "--version"], capture_output=True, text=True, timeout=30, check=False
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return  # jsii itself will say that Node is missing
    major = version.removeprefix("v").split(".")[0]
    if major.isdigit():
        os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", major)


def asset_uri(spec: DeploymentSpec, path: Path) -> str:
    """The S3 URI CDK gives a file asset: its own fingerprint of the file, the file's extension."""
    quiet_node_banners()
    from aws_cdk import FileSystem  # jsii starts only when a plan is built

    bucket = f"cdk-{CDK_QUALIFIER}-assets-{spec.accounts.compute}-{spec.region}"
    return f"s3://{bucket}/{FileSystem.fingerprint(str(path))}{path.suffix}"


def deployment_refs(spec: DeploymentSpec, build_dir: Path) -> ClusterRefs:
    """The references stacks.cluster_stack passes for `spec`, from this checkout's files (subnets and
    groups stay examples: they never change between two plans of one network)."""
    from dataclasses import replace

    from policies.cluster_nodes import payload_parameter_name

    payload = build_payload(spec, deployment_yaml(spec), build_dir)
    return replace(
        example_refs(spec),
        head_bootstrap_uri=asset_uri(spec, BOOTSTRAP / "head_node.sh"),
        gpu_bootstrap_uri=asset_uri(spec, BOOTSTRAP / "gpu_node.sh"),
        trn1_bootstrap_uri=asset_uri(spec, BOOTSTRAP / "trn1_node.sh"),
        neuron_install_uri=asset_uri(spec, BOOTSTRAP / "neuron_install.sh"),
        head_payload_uri=asset_uri(spec, payload),
        head_payload_parameter=payload_parameter_name(spec),
    )


def cluster_config_of(cdk_out: Path, spec: DeploymentSpec) -> dict[str, Any]:
    """The ClusterConfiguration a synthesized cluster stack passes to ParallelCluster."""
    template = json.loads((cdk_out / f"{spec.stack_names['cluster']}.template.json").read_text())
    (cluster,) = [r for r in template["Resources"].values() if r["Type"] == "Custom::PclusterCluster"]
    config: dict[str, Any] = cluster["Properties"]["ClusterConfiguration"]
    return config


def plan_update(
    old: DeploymentSpec,
    new: DeploymentSpec,
    *,
    build_dir: Path | None = None,
    configs: tuple[dict[str, Any], dict[str, Any]] | None = None,
) -> UpdatePlan:
    """`configs`: the two ClusterConfigurations when they come from synthesized templates; otherwise both
    are built here with deployment_refs (payloads written under `build_dir`, default build/update-plan)."""
    if old.cluster is None or new.cluster is None:
        raise ValueError("cluster: both specs need a cluster section")
    if configs is None:
        build = build_dir or REPO / "build" / "update-plan"
        old_config = build_cluster_config(old, deployment_refs(old, build / "old"))
        new_config = build_cluster_config(new, deployment_refs(new, build / "new"))
    else:
        old_config, new_config = configs
    classified = [classify(change, old_config, new_config) for change in diff_configs(old_config, new_config)]
    classified += _stack_level_changes(old, new)
    plan = UpdatePlan(classified, [])
    return UpdatePlan(classified, runbook(plan.action, new, bool(classified), old=old))


def runbook(
    action: Action, spec: DeploymentSpec, any_change: bool, old: DeploymentSpec | None = None, profile: str = "compute"
) -> list[str]:
    """The steps for `spec` (NEW.yaml); `old` (OLD.yaml, default: the same) names the stack a replacement deletes.
    Every AWS-facing step names the compute account's profile (pcluster takes it from AWS_PROFILE only)."""
    name, region, stack = cluster_name(spec), spec.region, spec.stack_names["cluster"]
    old_stack = (old or spec).stack_names["cluster"]
    pcluster = f"AWS_PROFILE={profile} pcluster"
    fleet = f"{pcluster} update-compute-fleet --cluster-name {name} --region {region}"
    deploy = (
        f"npx cdk deploy -c spec=NEW.yaml {stack} --profile {profile}   (CloudFormation updates the cluster through "
        "its custom resource)"
    )
    watch = f"{pcluster} describe-cluster --cluster-name {name} --region {region}   (wait for UPDATE_COMPLETE)"
    if not any_change:
        return ["No cluster change: nothing to do."]
    if action == Action.LIVE:
        return [
            deploy,
            watch,
            "A new payload (training code, deployment.yaml) comes with OnNodeUpdated: the head node re-runs "
            "head_node.sh, builds the new release on shared storage and switches llm-training to it; running "
            "jobs keep the release they started from.",
        ]
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
            f"{pcluster} describe-compute-fleet --cluster-name {name} --region {region}   (wait for STOPPED)",
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
            "Delete the old cluster, lifting its stack's termination protection first (README, Tearing down): "
            f"aws cloudformation update-termination-protection --no-enable-termination-protection "
            f"--stack-name {old_stack} --region {(old or spec).region} --profile {profile}",
            f"npx cdk destroy -c spec=OLD.yaml {old_stack} --profile {profile}",
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


@user_errors
def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(description="Classify the cluster changes between two specs.")
    parser.add_argument("old", help="the deployed spec")
    parser.add_argument("new", help="the spec to deploy")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--old-cdk-out", type=Path, help="cloud assembly of the deployed checkout")
    parser.add_argument("--new-cdk-out", type=Path, help="cloud assembly of the checkout to deploy")
    args = parser.parse_args(argv)
    if (args.old_cdk_out is None) != (args.new_cdk_out is None):
        raise UserError("--old-cdk-out and --new-cdk-out: give both or neither")
    try:
        old, new = load_spec(args.old), load_spec(args.new)
        configs = None
        if args.old_cdk_out is not None:
            configs = (cluster_config_of(args.old_cdk_out, old), cluster_config_of(args.new_cdk_out, new))
        plan = plan_update(old, new, configs=configs)
    except ValueError as error:
        raise UserError(str(error)) from None
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
