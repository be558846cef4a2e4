from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster.config_builder import build_cluster_config, example_refs
from cluster.update_plan import main, plan_update
from cluster.update_policy import POLICIES, Action, Change, classify, diff_configs, pattern_of
from cluster.verify.pcluster.runner import run_script, update_policies
from spec import load_spec, parse_spec
from tests.cluster.conftest import ALL_SPECS, spec_dict

DEFAULT = ALL_SPECS[0]


def edited(edit: Callable[[dict[str, Any]], None], path: Path = DEFAULT) -> Any:
    data = copy.deepcopy(spec_dict(path))
    edit(data)
    return parse_spec(data)


PAYLOAD = "HeadNode.CustomActions.OnNodeUpdated.Sequence"


def spec_changes(plan: Any) -> dict[str, Action]:
    """The plan's changes but the new payload: every spec edit changes the deployment.yaml the payload
    carries, which reaches the head node through OnNodeUpdated, a live update."""
    changes = {item.change.path: item.action for item in plan.changes}
    assert changes.pop(PAYLOAD, Action.LIVE) == Action.LIVE
    return changes


def actions(old: Any, new: Any) -> dict[str, Action]:
    return spec_changes(plan_update(old, new))


def gpu(data: dict[str, Any]) -> dict[str, Any]:
    queue: dict[str, Any] = data["cluster"]["queues"][0]
    return queue


RESOURCE = "Scheduling.SlurmQueues[gpu].ComputeResources[p5-48xlarge]"


def test_no_change() -> None:
    plan = plan_update(load_spec(), load_spec())
    assert plan.changes == []
    assert plan.action == Action.LIVE
    assert plan.steps == ["No cluster change: nothing to do."]


def test_live_raise_max_count_and_health_checks() -> None:
    def edit(data: dict[str, Any]) -> None:
        gpu(data).update(max_count=6, gpu_health_checks=False)

    plan = plan_update(load_spec(), edited(edit))
    assert spec_changes(plan) == {
        f"{RESOURCE}.MaxCount": Action.LIVE,
        f"{RESOURCE}.HealthChecks.Gpu.Enabled": Action.LIVE,
    }
    assert plan.action == Action.LIVE
    assert plan.steps[0].startswith("npx cdk deploy -c spec=NEW.yaml llm-demo-cluster --profile compute")


def test_added_queue_is_live() -> None:
    def edit(data: dict[str, Any]) -> None:
        data["cluster"]["queues"].append(
            {"name": "a100", "instance_type": "p4d.24xlarge", "max_count": 2, "placement_group": True}
        )

    assert actions(load_spec(), edited(edit)) == {"Scheduling.SlurmQueues[a100]": Action.LIVE}


def test_drain_through_queue_update_strategy() -> None:
    def edit(data: dict[str, Any]) -> None:
        data["cluster"]["containers"]["nemo_image"] = "/fsx/containers/llm-nemo-efa-25.07.01.sqsh"  # new bootstrap args
        gpu(data)["root_volume_gib"] = 400

    plan = plan_update(load_spec(), edited(edit))
    assert spec_changes(plan) == {
        "Scheduling.SlurmQueues[gpu].CustomActions.OnNodeConfigured.Sequence": Action.DRAIN,
        "Scheduling.SlurmQueues[gpu].ComputeSettings.LocalStorage.RootVolume.Size": Action.DRAIN,
    }
    assert plan.action == Action.DRAIN
    assert any("sinfo -R" in step for step in plan.steps)


def test_same_change_needs_a_stop_without_a_queue_update_strategy() -> None:
    old = edited(lambda d: d["cluster"].update(queue_update_strategy="COMPUTE_FLEET_STOP"))

    def edit(data: dict[str, Any]) -> None:
        data["cluster"]["queue_update_strategy"] = "COMPUTE_FLEET_STOP"
        gpu(data)["root_volume_gib"] = 400

    plan = plan_update(old, edited(edit))
    assert plan.action == Action.STOP
    assert plan.steps[1] == (
        "AWS_PROFILE=compute pcluster update-compute-fleet --cluster-name llm-demo --region us-east-1 --status STOP_REQUESTED"
    )
    assert plan.steps[-1].endswith("--status START_REQUESTED")


def test_stop_for_fleet_wide_settings_and_instance_type() -> None:
    def edit(data: dict[str, Any]) -> None:
        data["cluster"]["scaledown_idletime_minutes"] = 30
        gpu(data)["instance_type"] = "p5e.48xlarge"

    found = actions(load_spec(), edited(edit))
    assert found["Scheduling.SlurmSettings.ScaledownIdletime"] == Action.STOP
    # the compute resource is named after its type, so ParallelCluster sees one removed and one added
    assert found["Scheduling.SlurmQueues[gpu].ComputeResources[p5-48xlarge]"] == Action.STOP
    assert found["Scheduling.SlurmQueues[gpu].ComputeResources[p5e-48xlarge]"] == Action.LIVE


def test_shrinking_needs_a_stop_or_terminate() -> None:
    old = edited(lambda d: gpu(d).update(min_count=2, max_count=4))
    new = edited(lambda d: gpu(d).update(min_count=1, max_count=2))
    assert actions(old, new) == {f"{RESOURCE}.MinCount": Action.STOP, f"{RESOURCE}.MaxCount": Action.STOP}

    def terminate(data: dict[str, Any]) -> None:
        gpu(data).update(min_count=1, max_count=2)
        data["cluster"]["queue_update_strategy"] = "TERMINATE"

    assert actions(old, edited(terminate)) == {
        "Scheduling.SlurmSettings.QueueUpdateStrategy": Action.LIVE,
        f"{RESOURCE}.MinCount": Action.DRAIN,
        f"{RESOURCE}.MaxCount": Action.DRAIN,
    }


def test_deleting_a_managed_placement_group_needs_a_stop() -> None:
    found = actions(load_spec(), edited(lambda d: gpu(d).update(placement_group=False)))
    assert found == {f"{RESOURCE}.Networking.PlacementGroup.Enabled": Action.STOP}
    # naming an existing placement group replaces the managed one: same deletion
    found = actions(load_spec(), edited(lambda d: gpu(d).update(placement_group_name="ops-pg")))
    assert found == {f"{RESOURCE}.Networking.PlacementGroup.Name": Action.STOP}


def test_replace_for_os_head_node_and_version() -> None:
    def edit(data: dict[str, Any]) -> None:
        data["cluster"]["os"] = "rhel9"
        data["cluster"]["head_node"]["instance_type"] = "m7i.4xlarge"
        data["cluster"]["parallelcluster_version"] = "3.15.0"

    plan = plan_update(load_spec(), edited(edit))
    assert spec_changes(plan) == {
        "Image.Os": Action.REPLACE,
        "HeadNode.InstanceType": Action.REPLACE,
        "cluster.parallelcluster_version": Action.REPLACE,
    }
    assert plan.action == Action.REPLACE
    assert plan.steps[0] == "This change cannot be applied to the running cluster: create a new cluster instead."


def test_unsupported_for_managed_file_system_settings() -> None:
    plan = plan_update(load_spec(), edited(lambda d: d["cluster"]["fsx"].update(storage_gib=2400)))
    # A faster file system also shortens the stop's save, so KillWait follows (a live change).
    kill_wait, item = [c for c in plan.changes if c.change.path != PAYLOAD]
    assert (kill_wait.change.path, kill_wait.action) == ("Scheduling.SlurmSettings.CustomSlurmSettings", Action.LIVE)
    assert item.change.path == "SharedStorage[fsx].FsxLustreSettings.StorageCapacity"
    assert (item.change.old, item.change.new, item.action) == (1200, 2400, Action.UNSUPPORTED)
    assert plan.steps[0].startswith("Refused: revert the changes marked 'unsupported'")


def test_stack_level_settings_are_live() -> None:
    def edit(data: dict[str, Any]) -> None:
        data["cluster"].update(deletion_policy="Retain", termination_protection=False)

    assert actions(load_spec(), edited(edit)) == {
        "cluster.deletion_policy": Action.LIVE,
        "cluster.termination_protection": Action.LIVE,
    }


def test_unknown_policy_is_unsupported() -> None:
    change = Change("Scheduling.SlurmSettings.Database.Uri", None, "x", "UNKNOWN")
    assert classify(change, {}, {}).action == Action.UNSUPPORTED


def test_policies_cover_every_key_the_builder_emits() -> None:
    emitted: set[str] = set()

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            if path:
                emitted.add(path)
            for key, value in node.items():
                walk(value, f"{path}.{key}" if path else key)
        elif isinstance(node, list) and node and isinstance(node[0], dict) and not path.endswith(".Sequence"):
            emitted.add(path)
            for item in node:
                walk(item, path + "[]")
        else:
            emitted.add(path)

    for path in ALL_SPECS:
        spec = load_spec(path)
        walk(build_cluster_config(spec, example_refs(spec)), "")
    list_items = {p for p in emitted if p.endswith("[]")}
    assert emitted - list_items - set(POLICIES) == set()


def test_cli_prints_a_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = spec_dict()
    data["cluster"]["scaledown_idletime_minutes"] = 20
    new = tmp_path / "new.yaml"
    new.write_text(yaml.safe_dump(data))
    assert main([str(DEFAULT), str(new)]) == 0
    out = capsys.readouterr().out
    assert "[stop       ] Scheduling.SlurmSettings.ScaledownIdletime: 10 -> 20" in out
    assert "Update class: stop" in out
    assert main([str(DEFAULT), str(new), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["action"] == "stop"
    policies = {c["path"]: c["policy"] for c in payload["changes"]}
    assert policies == {"Scheduling.SlurmSettings.ScaledownIdletime": "COMPUTE_FLEET_STOP", PAYLOAD: "SUPPORTED"}


def test_cli_reports_bad_specs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: 1\n")
    assert main([str(DEFAULT), str(bad)]) == 2
    assert "bad.yaml" in capsys.readouterr().err


# ---------------------------------------------------------------- against aws-parallelcluster itself


@pytest.mark.pcluster
def test_policy_table_matches_parallelclusters_schema(pcluster_venv: Path) -> None:
    # A Sequence takes the policy of the Script/Args it replaces; a free-form slurm.conf entry inside
    # CustomSlurmSettings takes the list's own policy, a queue's partition option its queue section's.
    wanted = {
        path: path.replace(".Sequence", ".Script").split("[].", 1)[0]
        if "CustomSlurmSettings[]." in path
        else path.rsplit(".", 1)[0]
        if ".CustomSlurmSettings." in path
        else path.replace(".Sequence", ".Script")
        for path in POLICIES
    }
    theirs = update_policies(sorted(set(wanted.values())))
    assert {path: theirs[wanted[path]] for path in POLICIES} == POLICIES


SCENARIOS: dict[str, Callable[[dict[str, Any]], None]] = {
    "max-up": lambda d: gpu(d).update(max_count=6),
    "queue-added": lambda d: d["cluster"]["queues"].append(
        {"name": "a100", "instance_type": "p4d.24xlarge", "max_count": 2, "placement_group": True}
    ),
    "queue-removed-and-renamed": lambda d: gpu(d).update(name="h100"),
    "bootstrap-args": lambda d: d["cluster"]["containers"].update(
        nemo_image="/fsx/containers/llm-nemo-efa-25.07.01.sqsh"
    ),
    "placement-off": lambda d: gpu(d).update(placement_group=False),
    "scaledown": lambda d: d["cluster"].update(scaledown_idletime_minutes=30),
    "os-and-head": lambda d: d["cluster"].update(os="rocky9", head_node={"instance_type": "c6i.4xlarge"}),
    "fsx-size-and-compression": lambda d: d["cluster"]["fsx"].update(storage_gib=2400, data_compression="NONE"),
    "fleet-stop-strategy": lambda d: (
        d["cluster"].update(queue_update_strategy="COMPUTE_FLEET_STOP"),
        gpu(d).update(root_volume_gib=300),
    ),
    "egress-and-ssh": lambda d: (d["network"].update(internet_egress="nat"), d["cluster"].update(ssh_key_name="k")),
    "capacity-block": lambda d: gpu(d).update(
        min_count=2,
        max_count=2,
        placement_group=False,
        capacity={
            "type": "capacity_block",
            "reservation_id": "cr-0123456789abcdef0",
            "availability_zone": "us-east-1a",
        },
    ),
}


def _pcluster_key(change: Change) -> tuple[str, str, str]:
    """(path, policy, kind) as ParallelCluster reports it: an added or removed list item at the list's path."""
    if change.old is None or change.new is None:
        last = change.path.rsplit(".", 1)[-1]
        if last.endswith("]") and pattern_of(change.path[: change.path.rindex("[")]) in (
            "Scheduling.SlurmQueues",
            "Scheduling.SlurmQueues[].ComputeResources",
            "SharedStorage",
            "Tags",
        ):
            return change.path[: change.path.rindex("[")], change.policy, "added" if change.old is None else "removed"
    return change.path, change.policy, "changed"


@pytest.mark.pcluster
def test_diff_and_actions_agree_with_parallelclusters_config_patch(pcluster_venv: Path) -> None:
    base_spec = load_spec()
    base = build_cluster_config(base_spec, example_refs(base_spec))
    requests, ours = [], {}
    for name, edit in SCENARIOS.items():
        data = copy.deepcopy(spec_dict())
        edit(data)
        spec = parse_spec(data)
        target = build_cluster_config(spec, example_refs(spec))
        requests.append({"name": name, "old": base, "new": target})
        ours[name] = [(change, classify(change, base, target).action) for change in diff_configs(base, target)]
    theirs = {item["name"]: item["changes"] for item in run_script("config_patch.py", requests)}
    for name in SCENARIOS:
        mine = sorted(list(_pcluster_key(change)) for change, _ in ours[name])
        assert mine == sorted(entry[:3] for entry in theirs[name]), name
        # Their check with the fleet running: SUCCEEDED exactly where we say live or drain.
        verdict = {tuple(entry[:3]): entry[3] for entry in theirs[name]}
        for change, action in ours[name]:
            result = verdict[_pcluster_key(change)]
            expected = {"SUCCEEDED"} if action <= Action.DRAIN else {"ACTION NEEDED", "FAILED"}
            assert result in expected, (name, change.path, action, result)
            if action == Action.REPLACE:
                assert result == "FAILED", (name, change.path)
