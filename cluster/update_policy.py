"""What a change to a running cluster costs, by ParallelCluster's own update policies.

`diff_configs` walks two ClusterConfigurations the way ParallelCluster's ConfigPatch does (named
list items matched by their key, a missing section reported once with that section's policy) and
`classify` turns each change's policy into one of five actions, assuming the compute fleet runs:

    live         applies in place (a stack update)
    drain        goes through QueueUpdateStrategy (DRAIN: nodes are replaced as their jobs end)
    stop         needs the compute fleet stopped first (pcluster update-compute-fleet)
    replace      cannot be applied to this cluster: create a new one
    unsupported  refused: it would lose data or ParallelCluster never allows it; revert it

POLICIES lists the policy of every key the builder emits; tests compare it with the metadata of
aws-parallelcluster's own schema and its ConfigPatch.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any


class Action(enum.IntEnum):
    LIVE = 0
    DRAIN = 1
    STOP = 2
    REPLACE = 3
    UNSUPPORTED = 4

    @property
    def label(self) -> str:
        return self.name.lower()


# ParallelCluster's policy name for each config path the builder emits ("[]": any list item).
POLICIES: dict[str, str] = {
    "Region": "UNSUPPORTED",
    "Image": "UNSUPPORTED",
    "Image.Os": "UNSUPPORTED",
    "Image.CustomAmi": "UNSUPPORTED",
    "Imds": "UNSUPPORTED",
    "Imds.ImdsSupport": "UNSUPPORTED",
    "HeadNode": "SUPPORTED",
    "HeadNode.InstanceType": "UNSUPPORTED",
    "HeadNode.Networking": "UNSUPPORTED",
    "HeadNode.Networking.SubnetId": "UNSUPPORTED",
    "HeadNode.Networking.SecurityGroups": "SUPPORTED",
    "HeadNode.Networking.AdditionalSecurityGroups": "SUPPORTED",
    "HeadNode.Ssh": "SUPPORTED",
    "HeadNode.Ssh.KeyName": "UNSUPPORTED",
    "HeadNode.LocalStorage": "UNSUPPORTED",
    "HeadNode.LocalStorage.RootVolume": "UNSUPPORTED",
    "HeadNode.LocalStorage.RootVolume.Size": "UNSUPPORTED",
    "HeadNode.LocalStorage.RootVolume.Encrypted": "UNSUPPORTED",
    "HeadNode.LocalStorage.RootVolume.VolumeType": "UNSUPPORTED",
    "HeadNode.Iam": "SUPPORTED",
    "HeadNode.Iam.InstanceRole": "SUPPORTED",
    "HeadNode.Imds": "UNSUPPORTED",
    "HeadNode.Imds.Secured": "UNSUPPORTED",
    "HeadNode.CustomActions": "IGNORED",
    "HeadNode.CustomActions.OnNodeConfigured": "UNSUPPORTED",
    "HeadNode.CustomActions.OnNodeConfigured.Sequence": "UNSUPPORTED",
    "HeadNode.CustomActions.OnNodeUpdated": "SUPPORTED",
    "HeadNode.CustomActions.OnNodeUpdated.Sequence": "SUPPORTED",
    "Scheduling": "UNSUPPORTED",
    "Scheduling.Scheduler": "UNSUPPORTED",
    "Scheduling.ScalingStrategy": "SUPPORTED",
    "Scheduling.SlurmSettings": "IGNORED",
    "Scheduling.SlurmSettings.ScaledownIdletime": "COMPUTE_FLEET_STOP",
    "Scheduling.SlurmSettings.QueueUpdateStrategy": "IGNORED",
    "Scheduling.SlurmSettings.CustomSlurmSettings": "SUPPORTED",
    # Free-form slurm.conf entries inside CustomSlurmSettings take the list's policy.
    "Scheduling.SlurmSettings.CustomSlurmSettings[].PrologFlags": "SUPPORTED",
    "Scheduling.SlurmSettings.CustomSlurmSettings[].SchedulerParameters": "SUPPORTED",
    "Scheduling.SlurmSettings.CustomSlurmSettings[].KillWait": "SUPPORTED",
    # cluster.accounting's slurm.conf settings (cluster/accounting.py).
    "Scheduling.SlurmSettings.CustomSlurmSettings[].AccountingStorageTRES": "SUPPORTED",
    "Scheduling.SlurmSettings.CustomSlurmSettings[].AccountingStoreFlags": "SUPPORTED",
    "Scheduling.SlurmSettings.CustomSlurmSettings[].AccountingStorageEnforce": "SUPPORTED",
    "Scheduling.SlurmSettings.CustomSlurmSettings[].PriorityType": "SUPPORTED",
    "Scheduling.SlurmSettings.CustomSlurmSettings[].PriorityWeightFairshare": "SUPPORTED",
    "Scheduling.SlurmSettings.CustomSlurmSettings[].PriorityWeightAge": "SUPPORTED",
    "Scheduling.SlurmSettings.CustomSlurmSettings[].PriorityWeightJobSize": "SUPPORTED",
    "Scheduling.SlurmSettings.CustomSlurmSettings[].PriorityWeightQOS": "SUPPORTED",
    "Scheduling.SlurmSettings.CustomSlurmSettings[].PriorityWeightPartition": "SUPPORTED",
    "Scheduling.SlurmSettings.CustomSlurmSettings[].PriorityDecayHalfLife": "SUPPORTED",
    "Scheduling.SlurmSettings.CustomSlurmSettings[].PriorityMaxAge": "SUPPORTED",
    "Scheduling.SlurmSettings.Database": "COMPUTE_FLEET_STOP",
    "Scheduling.SlurmSettings.Database.Uri": "COMPUTE_FLEET_STOP",
    "Scheduling.SlurmSettings.Database.UserName": "COMPUTE_FLEET_STOP",
    "Scheduling.SlurmSettings.Database.PasswordSecretArn": "COMPUTE_FLEET_STOP",
    "Scheduling.SlurmSettings.Database.DatabaseName": "SUPPORTED",
    "Scheduling.SlurmSettings.Dns": "UNSUPPORTED",
    "Scheduling.SlurmSettings.Dns.DisableManagedDns": "UNSUPPORTED",
    "Scheduling.SlurmSettings.Dns.UseEc2Hostnames": "UNSUPPORTED",
    "Scheduling.SlurmQueues": "RESIZE_UPDATE_STRATEGY_ON_REMOVE",
    "Scheduling.SlurmQueues[].Name": "UNSUPPORTED",
    "Scheduling.SlurmQueues[].CapacityType": "QUEUE_UPDATE_STRATEGY",
    "Scheduling.SlurmQueues[].AllocationStrategy": "QUEUE_UPDATE_STRATEGY",
    "Scheduling.SlurmQueues[].JobExclusiveAllocation": "SUPPORTED",
    "Scheduling.SlurmQueues[].Networking": "QUEUE_UPDATE_STRATEGY",
    "Scheduling.SlurmQueues[].Networking.SubnetIds": "MANAGED_FSX",
    "Scheduling.SlurmQueues[].Networking.SecurityGroups": "SUPPORTED",
    "Scheduling.SlurmQueues[].Networking.AdditionalSecurityGroups": "SUPPORTED",
    "Scheduling.SlurmQueues[].ComputeSettings": "QUEUE_UPDATE_STRATEGY",
    "Scheduling.SlurmQueues[].ComputeSettings.LocalStorage": "QUEUE_UPDATE_STRATEGY",
    "Scheduling.SlurmQueues[].ComputeSettings.LocalStorage.RootVolume": "QUEUE_UPDATE_STRATEGY",
    "Scheduling.SlurmQueues[].ComputeSettings.LocalStorage.RootVolume.Size": "QUEUE_UPDATE_STRATEGY",
    "Scheduling.SlurmQueues[].ComputeSettings.LocalStorage.RootVolume.Encrypted": "QUEUE_UPDATE_STRATEGY",
    "Scheduling.SlurmQueues[].ComputeSettings.LocalStorage.RootVolume.VolumeType": "QUEUE_UPDATE_STRATEGY",
    "Scheduling.SlurmQueues[].Iam": "SUPPORTED",
    "Scheduling.SlurmQueues[].Iam.InstanceRole": "SUPPORTED",
    # A queue's allowed_groups: a free-form partition option takes the section's policy.
    "Scheduling.SlurmQueues[].CustomSlurmSettings": "SUPPORTED",
    "Scheduling.SlurmQueues[].CustomSlurmSettings.AllowGroups": "SUPPORTED",
    "Scheduling.SlurmQueues[].Image": "QUEUE_UPDATE_STRATEGY",
    "Scheduling.SlurmQueues[].Image.CustomAmi": "QUEUE_UPDATE_STRATEGY",
    "Scheduling.SlurmQueues[].CustomActions": "QUEUE_UPDATE_STRATEGY",
    "Scheduling.SlurmQueues[].CustomActions.OnNodeConfigured": "QUEUE_UPDATE_STRATEGY",
    "Scheduling.SlurmQueues[].CustomActions.OnNodeConfigured.Sequence": "QUEUE_UPDATE_STRATEGY",
    "Scheduling.SlurmQueues[].ComputeResources": "RESIZE_UPDATE_STRATEGY_ON_REMOVE",
    "Scheduling.SlurmQueues[].ComputeResources[].Name": "UNSUPPORTED",
    "Scheduling.SlurmQueues[].ComputeResources[].InstanceType": "COMPUTE_FLEET_STOP",
    "Scheduling.SlurmQueues[].ComputeResources[].MinCount": "RESIZE_UPDATE_STRATEGY_ON_REMOVE",
    "Scheduling.SlurmQueues[].ComputeResources[].MaxCount": "RESIZE_UPDATE_STRATEGY_ON_REMOVE",
    "Scheduling.SlurmQueues[].ComputeResources[].Efa": "QUEUE_UPDATE_STRATEGY",
    "Scheduling.SlurmQueues[].ComputeResources[].Efa.Enabled": "QUEUE_UPDATE_STRATEGY",
    "Scheduling.SlurmQueues[].ComputeResources[].CapacityReservationTarget": "QUEUE_UPDATE_STRATEGY",
    "Scheduling.SlurmQueues[].ComputeResources[].CapacityReservationTarget.CapacityReservationId": (
        "QUEUE_UPDATE_STRATEGY"
    ),
    "Scheduling.SlurmQueues[].ComputeResources[].Networking": "MANAGED_PLACEMENT_GROUP",
    "Scheduling.SlurmQueues[].ComputeResources[].Networking.PlacementGroup": "MANAGED_PLACEMENT_GROUP",
    "Scheduling.SlurmQueues[].ComputeResources[].Networking.PlacementGroup.Enabled": "MANAGED_PLACEMENT_GROUP",
    "Scheduling.SlurmQueues[].ComputeResources[].Networking.PlacementGroup.Name": "MANAGED_PLACEMENT_GROUP",
    "Scheduling.SlurmQueues[].ComputeResources[].HealthChecks": "SUPPORTED",
    "Scheduling.SlurmQueues[].ComputeResources[].HealthChecks.Gpu": "SUPPORTED",
    "Scheduling.SlurmQueues[].ComputeResources[].HealthChecks.Gpu.Enabled": "SUPPORTED",
    "SharedStorage": "SHARED_STORAGE_UPDATE_POLICY",
    "SharedStorage[].Name": "UNSUPPORTED",
    "SharedStorage[].StorageType": "UNSUPPORTED",
    "SharedStorage[].MountDir": "SHARED_STORAGE_UPDATE_POLICY",
    "SharedStorage[].FsxLustreSettings": "IGNORED",
    "SharedStorage[].FsxLustreSettings.StorageCapacity": "UNSUPPORTED",
    "SharedStorage[].FsxLustreSettings.DeploymentType": "UNSUPPORTED",
    "SharedStorage[].FsxLustreSettings.PerUnitStorageThroughput": "UNSUPPORTED",
    "SharedStorage[].FsxLustreSettings.DataCompressionType": "SUPPORTED",
    "SharedStorage[].FsxLustreSettings.DeletionPolicy": "SUPPORTED",
    "SharedStorage[].FsxLustreSettings.FileSystemId": "UNSUPPORTED",
    "SharedStorage[].FsxLustreSettings.AutomaticBackupRetentionDays": "SUPPORTED",
    "SharedStorage[].FsxLustreSettings.DailyAutomaticBackupStartTime": "SUPPORTED",
    "SharedStorage[].FsxLustreSettings.CopyTagsToBackups": "UNSUPPORTED",
    "Monitoring": "IGNORED",
    "Monitoring.DetailedMonitoring": "COMPUTE_FLEET_STOP",
    "Monitoring.Logs": "UNSUPPORTED",
    "Monitoring.Logs.CloudWatch": "UNSUPPORTED",
    "Monitoring.Logs.CloudWatch.Enabled": "UNSUPPORTED",
    "Monitoring.Logs.CloudWatch.RetentionInDays": "SUPPORTED",
    "Monitoring.Logs.CloudWatch.DeletionPolicy": "SUPPORTED",
    "Monitoring.Dashboards": "SUPPORTED",
    "Monitoring.Dashboards.CloudWatch": "SUPPORTED",
    "Monitoring.Dashboards.CloudWatch.Enabled": "SUPPORTED",
    "Monitoring.Alarms": "SUPPORTED",
    "Monitoring.Alarms.Enabled": "SUPPORTED",
    "DevSettings": "SUPPORTED",
    "DevSettings.Timeouts": "SUPPORTED",
    "DevSettings.Timeouts.HeadNodeBootstrapTimeout": "UNSUPPORTED",
    "DevSettings.Timeouts.ComputeNodeBootstrapTimeout": "SUPPORTED",
    "Tags": "SUPPORTED_UNLESS_ADC",
    "Tags[].Key": "UNSUPPORTED",
    "Tags[].Value": "SUPPORTED_UNLESS_ADC",
}

# Lists of sections, and the key that identifies an item across the two configs.
LIST_KEYS: dict[str, str] = {
    "Scheduling.SlurmQueues": "Name",
    "Scheduling.SlurmQueues[].ComputeResources": "Name",
    "SharedStorage": "Name",
    "Tags": "Key",
}

_ITEM_RE = re.compile(r"\[[^\]]*\]")
_MISSING = object()


@dataclass(frozen=True)
class Change:
    path: str  # e.g. Scheduling.SlurmQueues[gpu].ComputeResources[p5-48xlarge].MaxCount
    old: Any  # None when added
    new: Any  # None when removed
    policy: str

    @property
    def pattern(self) -> str:
        return pattern_of(self.path)

    @property
    def key(self) -> str:
        return self.pattern.rsplit(".", 1)[-1].removesuffix("[]")


@dataclass(frozen=True)
class Classified:
    change: Change
    action: Action
    reason: str


def pattern_of(path: str) -> str:
    return _ITEM_RE.sub("[]", path)


def policy_of(path: str) -> str:
    """The policy for a concrete or pattern path; UNKNOWN (ParallelCluster's default) when not listed."""
    return POLICIES.get(pattern_of(path), "UNKNOWN")


def diff_configs(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Change]:
    return list(_diff_section(old, new, ""))


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _diff_section(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None, prefix: str) -> Iterator[Change]:
    old = old or {}
    new = new or {}
    for key in [*old, *(k for k in new if k not in old)]:
        path = _join(prefix, key)
        pattern = pattern_of(path)
        before, after = old.get(key, _MISSING), new.get(key, _MISSING)
        if pattern in LIST_KEYS:
            yield from _diff_list(before, after, path, LIST_KEYS[pattern])
        elif isinstance(before, Mapping) or isinstance(after, Mapping):
            present_before, present_after = before is not _MISSING, after is not _MISSING
            if present_before and present_after:
                yield from _diff_section(before, after, path)
            elif POLICIES.get(pattern) == "IGNORED":
                # ParallelCluster looks inside an IGNORED section that appears or disappears.
                yield from _diff_section(before if present_before else None, after if present_after else None, path)
            else:
                yield Change(path, _value(before), _value(after), policy_of(path))
        elif before != after:
            yield Change(path, _value(before), _value(after), policy_of(path))


def _value(value: Any) -> Any:
    return None if value is _MISSING else value


def _diff_list(old: Any, new: Any, path: str, key: str) -> Iterator[Change]:
    old_items = {item[key]: item for item in ([] if old is _MISSING else old)}
    new_items = {item[key]: item for item in ([] if new is _MISSING else new)}
    policy = policy_of(path)
    for name, item in new_items.items():
        if name in old_items:
            yield from _diff_section(old_items[name], item, f"{path}[{name}]")
        else:
            yield Change(f"{path}[{name}]", None, item, policy)
    for name, item in old_items.items():
        if name not in new_items:
            yield Change(f"{path}[{name}]", item, None, policy)


# ---------------------------------------------------------------- classification (fleet assumed running)


def _queue_update_strategy(config: Mapping[str, Any]) -> str:
    return str(config.get("Scheduling", {}).get("SlurmSettings", {}).get("QueueUpdateStrategy", "COMPUTE_FLEET_STOP"))


def _managed_fsx_names(config: Mapping[str, Any]) -> set[str]:
    return {
        storage["Name"]
        for storage in config.get("SharedStorage", [])
        if storage.get("StorageType") == "FsxLustre" and "FileSystemId" not in storage.get("FsxLustreSettings", {})
    }


def _lookup(config: Mapping[str, Any], path: str) -> Any:
    """The value at a concrete path such as Scheduling.SlurmQueues[gpu].ComputeResources[p5]."""
    node: Any = config
    for part in re.findall(r"[^.\[\]]+(?:\[[^\]]*\])?", path):
        name, _, item = part.partition("[")
        if not isinstance(node, Mapping):
            return None
        node = node.get(name)
        if item:
            wanted = item[:-1]
            list_key = LIST_KEYS.get(pattern_of(path[: path.index(part) + len(name)]), "Name")
            node = next((entry for entry in node or [] if entry.get(list_key) == wanted), None)
    return node


def _placement(config: Mapping[str, Any], path: str) -> Mapping[str, Any] | None:
    match = re.match(r"^(Scheduling\.SlurmQueues\[[^\]]*\])(\.ComputeResources\[[^\]]*\])?", path)
    if match is None:
        return None
    queue = _lookup(config, match.group(1)) or {}
    resource = _lookup(config, match.group(0)) if match.group(2) else {}
    found = (resource or {}).get("Networking", {}).get("PlacementGroup") or queue.get("Networking", {}).get(
        "PlacementGroup"
    )
    return found


def _managed_placement(placement: Mapping[str, Any] | None) -> bool:
    return bool(placement and placement.get("Enabled") and not (placement.get("Name") or placement.get("Id")))


def classify(change: Change, old: Mapping[str, Any], new: Mapping[str, Any]) -> Classified:
    """The action a running cluster needs for `change` (old/new: the whole configs)."""
    strategy = _queue_update_strategy(new)
    in_queues = change.path.startswith("Scheduling.SlurmQueues[")
    policy = change.policy

    def by_strategy(what: str) -> Classified:
        if in_queues and strategy in ("DRAIN", "TERMINATE"):
            return Classified(change, Action.DRAIN, f"{what}; QueueUpdateStrategy {strategy} applies it to the nodes")
        return Classified(change, Action.STOP, f"{what}; the compute fleet must be stopped")

    if policy in ("SUPPORTED", "IGNORED", "SUPPORTED_UNLESS_ADC"):
        return Classified(change, Action.LIVE, "applies to the running cluster")
    if policy == "QUEUE_UPDATE_STRATEGY":
        return by_strategy("changes how queue nodes launch")
    if policy == "RESIZE_UPDATE_STRATEGY_ON_REMOVE":
        if change.old is None and change.new is not None:
            return Classified(change, Action.LIVE, "adds capacity; applies to the running cluster")
        if change.key == "MaxCount" and int(change.new or 10) >= int(change.old or 10):
            return Classified(change, Action.LIVE, "raises MaxCount; applies to the running cluster")
        if change.key == "MinCount" and _min_count_covered(change, old, new):
            return Classified(change, Action.LIVE, "raises MinCount with MaxCount; applies to the running cluster")
        if change.path.startswith("Scheduling.SlurmQueues") and strategy == "TERMINATE":
            return Classified(change, Action.DRAIN, "removes nodes; QueueUpdateStrategy TERMINATE ends their jobs")
        return Classified(
            change, Action.STOP, "removes nodes; stop the compute fleet (or use QueueUpdateStrategy TERMINATE)"
        )
    if policy == "MANAGED_PLACEMENT_GROUP":
        if _managed_placement(_placement(old, change.path)) and not _managed_placement(_placement(new, change.path)):
            return Classified(
                change, Action.STOP, "deletes a managed placement group; the compute fleet must be stopped"
            )
        return by_strategy("changes node placement")
    if policy == "MANAGED_FSX":
        if _managed_fsx_names(old) & _managed_fsx_names(new):
            return Classified(
                change,
                Action.UNSUPPORTED,
                "queue subnets cannot change while a managed FSx for Lustre is attached (it would be recreated)",
            )
        return by_strategy("changes queue subnets")
    if policy == "SHARED_STORAGE_UPDATE_POLICY":
        item = change.new if change.new is not None else change.old
        mount = item.get("MountDir") if isinstance(item, Mapping) else item
        if mount in ("home", "/home"):
            return Classified(change, Action.UNSUPPORTED, "/home cannot change during an update")
        settings = item.get("FsxLustreSettings", {}) if isinstance(item, Mapping) else {}
        if "FileSystemId" in settings:
            return Classified(change, Action.LIVE, "mounts or unmounts an existing file system on running nodes")
        if strategy in ("DRAIN", "TERMINATE"):
            return Classified(
                change, Action.DRAIN, f"changes shared storage; QueueUpdateStrategy {strategy} applies it"
            )
        return Classified(change, Action.STOP, "changes shared storage; the compute fleet must be stopped")
    if policy in ("COMPUTE_FLEET_STOP", "COMPUTE_AND_LOGIN_NODES_STOP", "HEAD_NODE_STOP"):
        return Classified(change, Action.STOP, "needs the compute fleet stopped")
    if policy == "COMPUTE_FLEET_STOP_ON_REMOVE":
        if change.old is None:
            return Classified(change, Action.LIVE, "adds; applies to the running cluster")
        return Classified(change, Action.STOP, "removes; the compute fleet must be stopped")
    if policy == "UNSUPPORTED":
        if change.path.startswith("SharedStorage"):
            return Classified(
                change,
                Action.UNSUPPORTED,
                "ParallelCluster cannot change a managed file system in place; a new cluster would create a new "
                "file system (keep data with DeletionPolicy Retain and mount it by FileSystemId)",
            )
        return Classified(change, Action.REPLACE, "ParallelCluster cannot update this; create a new cluster")
    return Classified(change, Action.UNSUPPORTED, f"update policy {policy} is not supported by this plan")


def _min_count_covered(change: Change, old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    parent = change.path.rsplit(".", 1)[0]
    old_resource, new_resource = _lookup(old, parent) or {}, _lookup(new, parent) or {}
    max_delta = int(new_resource.get("MaxCount", 10)) - int(old_resource.get("MaxCount", 10))
    min_delta = int(change.new or 0) - int(change.old or 0)
    return max_delta >= min_delta
