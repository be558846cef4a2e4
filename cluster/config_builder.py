"""Spec + deployment references -> the ParallelCluster 3 ClusterConfiguration (a plain dict).

The references (subnets, security groups, roles, bootstrap script URIs) may be CDK token strings
such as '${Token[TOKEN.123]}': the builder never parses or checks them, it only places them.
Everything else comes from the validated spec and the instance facts table.

    python -m cluster.config_builder [SPEC.yaml] [--json]

prints the config for a spec with example references (what the cluster stack would pass).
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field
from typing import Any

import yaml

from cluster.accounting import slurm_conf_settings
from cluster.health.facts import DEFAULT_MIN_SCRATCH_FREE_GIB
from policies.cluster_nodes import payload_parameter_name
from spec.artifacts import artifact_locations
from spec.cli import OneLineParser, user_errors
from spec.cluster import ClusterSpec, QueueSpec
from spec.errors import SpecError
from spec.load import load_spec
from spec.model import QUEUE_ROLE_PREFIX, DeploymentSpec
from spec.platform.instances import instance_facts
from spec.platform.neuron import neuron_pins

CAPACITY_TYPES = {"on_demand": "ONDEMAND", "odcr": "ONDEMAND", "capacity_block": "CAPACITY_BLOCK"}
FSX_NAME = "fsx"


@dataclass(frozen=True)
class ClusterRefs:
    """What the deployment supplies; any field may be an unresolved CDK token."""

    head_subnet_id: str
    compute_subnet_id: str
    head_instance_role_arn: str
    compute_instance_role_arn: str
    head_bootstrap_uri: str
    gpu_bootstrap_uri: str
    trn1_bootstrap_uri: str
    # Added to ParallelCluster's managed groups (which carry the EFA self rule and the head<->compute
    # rules); typically the group that reaches the VPC endpoints and FSx.
    additional_security_group_ids: tuple[str, ...] = ()
    # When set, these groups REPLACE ParallelCluster's managed ones (whose egress is open to the world):
    # the deployment's cluster group carries the EFA self rule and egress only to listed destinations.
    security_group_ids: tuple[str, ...] = ()
    # S3 URI of the head node's payload: the training package and cluster/health's prolog/epilog. It is
    # content-addressed, so it changes with the code: it goes only into OnNodeUpdated (update policy
    # SUPPORTED), never into OnNodeConfigured, whose any change ParallelCluster refuses (UNSUPPORTED).
    head_payload_uri: str | None = None
    # SSM parameter whose value is head_payload_uri: the stable key OnNodeConfigured names, so the head
    # node finds the current payload at creation while its CustomActions never change with the code.
    head_payload_parameter: str | None = None
    # S3 URI of neuron_install.sh, for trn1 nodes with internet egress whose AMI lacks the pins.
    neuron_install_uri: str | None = None
    # S3 URI of nxdt_install.sh, for trn1 nodes whose AMI lacks the NxDT stack (installed from its wheelhouse).
    nxdt_install_uri: str | None = None
    # The accounting database (cluster.accounting): host:port of its writer endpoint and the Secrets Manager
    # secret holding the admin password (ParallelCluster's head node reads it to configure slurmdbd).
    # Groups of the head node only, added to the ones above (the accounting database admits only this one).
    head_security_group_ids: tuple[str, ...] = ()
    accounting_database_uri: str | None = None
    accounting_password_secret_arn: str | None = None
    tags: dict[str, str] = field(default_factory=dict)


def example_refs(spec: DeploymentSpec) -> ClusterRefs:
    """Realistic stand-ins for offline use (docs, tests, `python -m cluster.config_builder`).

    Role ARNs are the real deterministic ones; subnet and group ids are examples, placed where the cluster stack
    places its own: the cluster group as SecurityGroups (replacing ParallelCluster's), plus the head node's group
    with accounting.
    """
    assets = f"s3://{spec.name}-cluster-assets-{spec.accounts.compute}"
    accounting = spec.cluster is not None and spec.cluster.accounting.enabled
    return ClusterRefs(
        head_subnet_id="subnet-0123456789abcdef0",
        compute_subnet_id="subnet-0123456789abcdef0",
        head_instance_role_arn=spec.role_arn("head-node"),
        compute_instance_role_arn=spec.role_arn("cluster-node"),
        head_bootstrap_uri=f"{assets}/bootstrap/head_node.sh",
        gpu_bootstrap_uri=f"{assets}/bootstrap/gpu_node.sh",
        trn1_bootstrap_uri=f"{assets}/bootstrap/trn1_node.sh",
        security_group_ids=("sg-0123456789abcdef0",),
        head_security_group_ids=("sg-0fedcba9876543210",) if accounting else (),
        head_payload_uri=f"{assets}/payload/head_node_payload.tar.gz",
        head_payload_parameter=payload_parameter_name(spec),
        neuron_install_uri=f"{assets}/bootstrap/neuron_install.sh",
        nxdt_install_uri=f"{assets}/bootstrap/nxdt_install.sh",
        accounting_database_uri=f"{spec.name}-accounting.cluster-c0example000.{spec.region}.rds.amazonaws.com:3306",
        accounting_password_secret_arn=(
            f"arn:aws:secretsmanager:{spec.region}:{spec.accounts.compute}:secret:{spec.name}/slurm-accounting-AbCdEf"
        ),
    )


def cluster_name(spec: DeploymentSpec) -> str:
    """The ParallelCluster name: the deployment name (the stack is '<name>-cluster', and they must differ)."""
    return spec.name


def build_cluster_config(spec: DeploymentSpec, refs: ClusterRefs) -> dict[str, Any]:
    """The ClusterConfiguration for `spec.cluster`; raises ValueError when the spec has no cluster."""
    cluster = spec.cluster
    if cluster is None:
        raise ValueError("cluster: the spec has no cluster section")
    no_egress = spec.network.internet_egress == "none"
    config: dict[str, Any] = {
        "Region": spec.region,
        "Image": _image(cluster),
        "Imds": {"ImdsSupport": "v2.0"},
        "HeadNode": _head_node(spec, refs),
        "Scheduling": {
            "Scheduler": "slurm",
            "ScalingStrategy": cluster.scaling_strategy,
            "SlurmSettings": _slurm_settings(cluster, refs, no_egress),
            "SlurmQueues": [_queue(spec, cluster, queue, refs) for queue in cluster.queues],
        },
        "Monitoring": {
            "DetailedMonitoring": False,
            "Logs": {
                "CloudWatch": {
                    "Enabled": True,
                    "RetentionInDays": cluster.log_retention_days,
                    "DeletionPolicy": "Retain",
                }
            },
            "Dashboards": {"CloudWatch": {"Enabled": True}},
            "Alarms": {"Enabled": True},
        },
        "DevSettings": {
            "Timeouts": {
                "HeadNodeBootstrapTimeout": cluster.bootstrap_timeout_minutes * 60,
                "ComputeNodeBootstrapTimeout": cluster.bootstrap_timeout_minutes * 60,
            }
        },
        "Tags": [{"Key": key, "Value": value} for key, value in {"deployment": spec.name, **refs.tags}.items()],
    }
    if cluster.fsx is not None:
        config["SharedStorage"] = [_fsx(cluster)]
    return config


def custom_resource_properties(spec: DeploymentSpec, refs: ClusterRefs) -> dict[str, Any]:
    """Properties of the Custom::PclusterCluster resource (DeletionPolicy is a property, not the CFN attribute)."""
    assert spec.cluster is not None
    return {
        "ClusterName": cluster_name(spec),
        "ClusterConfiguration": build_cluster_config(spec, refs),
        "DeletionPolicy": spec.cluster.deletion_policy,
    }


def _image(cluster: ClusterSpec) -> dict[str, Any]:
    image: dict[str, Any] = {"Os": cluster.os}
    if cluster.custom_ami:
        image["CustomAmi"] = cluster.custom_ami
    return image


def _networking_groups(refs: ClusterRefs, head: bool = False) -> dict[str, Any]:
    extra = list(refs.head_security_group_ids) if head else []
    if refs.security_group_ids:
        return {"SecurityGroups": [*refs.security_group_ids, *extra]}
    additional = [*refs.additional_security_group_ids, *extra]
    return {"AdditionalSecurityGroups": additional} if additional else {}


def _head_node_args(spec: DeploymentSpec, payload: list[str]) -> list[str]:
    cluster = spec.cluster
    assert cluster is not None
    args = ["--cluster-name-tag", "deployment"]
    if cluster.fsx is not None:
        args += ["--shared-dir", cluster.fsx.mount_dir]
    if payload:
        args += payload
        if cluster.fsx is not None:
            args += _python_env_args(spec)
    if cluster.containers.pyxis and any(instance_facts(q.instance_type).accelerator == "gpu" for q in cluster.queues):
        args += ["--pyxis", "true"]
    return args


def _head_custom_actions(spec: DeploymentSpec, refs: ClusterRefs) -> dict[str, Any]:
    """OnNodeConfigured names only stable things (the script, the payload's SSM key); OnNodeUpdated
    names the payload itself, so a code change is a SUPPORTED update that re-runs the script."""
    script = refs.head_bootstrap_uri
    if refs.head_payload_parameter:
        configured = _head_node_args(spec, ["--payload-parameter", refs.head_payload_parameter])
    else:
        configured = _head_node_args(spec, ["--payload", refs.head_payload_uri] if refs.head_payload_uri else [])
    actions: dict[str, Any] = {"OnNodeConfigured": {"Sequence": [{"Script": script, "Args": configured}]}}
    if refs.head_payload_parameter and refs.head_payload_uri:
        updated = _head_node_args(spec, ["--payload", refs.head_payload_uri])
        actions["OnNodeUpdated"] = {"Sequence": [{"Script": script, "Args": updated}]}
    return actions


def _head_node(spec: DeploymentSpec, refs: ClusterRefs) -> dict[str, Any]:
    cluster = spec.cluster
    assert cluster is not None
    head: dict[str, Any] = {
        "InstanceType": cluster.head_node.instance_type,
        "Networking": {"SubnetId": refs.head_subnet_id, **_networking_groups(refs, head=True)},
        "LocalStorage": {
            "RootVolume": {"Size": cluster.head_node.root_volume_gib, "Encrypted": True, "VolumeType": "gp3"}
        },
        "Iam": {"InstanceRole": refs.head_instance_role_arn},
        "Imds": {"Secured": True},
        "CustomActions": _head_custom_actions(spec, refs),
    }
    if cluster.ssh_key_name:
        head["Ssh"] = {"KeyName": cluster.ssh_key_name}
    return head


def _python_env_args(spec: DeploymentSpec) -> list[str]:
    """The training env on shared storage: wheels from the wheelhouse (the spec's, or the artifacts bucket's
    without internet egress: spec.artifacts, where make upload-artifacts puts them), else PyPI. head_node.sh
    reads the exporters' binaries from the wheelhouse's observability/ folder."""
    assert spec.cluster is not None
    wheelhouse = artifact_locations(spec).python_wheelhouse
    source = "internet" if wheelhouse is None else f"wheelhouse:{wheelhouse.uri}"
    return ["--python", f"python{spec.cluster.python_version}", "--python-env", source]


def _slurm_settings(cluster: ClusterSpec, refs: ClusterRefs, no_egress: bool) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "ScaledownIdletime": cluster.scaledown_idletime_minutes,
        "QueueUpdateStrategy": cluster.queue_update_strategy,
        # The node health prolog (cluster/health) must run when nodes are allocated, before the job's first
        # step, and a job whose prolog failed on a drained node must be requeued, not held.
        "CustomSlurmSettings": [{"PrologFlags": "Alloc"}, {"SchedulerParameters": "nohold_on_prolog_fail"}],
    }
    kill_wait = kill_wait_s(cluster)
    if kill_wait is not None:
        # Between SIGTERM (scancel, a preemption, the time limit) and SIGKILL: long enough for the stop's save.
        settings["CustomSlurmSettings"].append({"KillWait": kill_wait})
    accounting = cluster.accounting
    if accounting.enabled:
        if not (refs.accounting_database_uri and refs.accounting_password_secret_arn):
            raise ValueError("cluster.accounting.enabled: True needs the database's endpoint and password secret")
        settings["Database"] = {
            "Uri": refs.accounting_database_uri,
            "UserName": accounting.database.user_name,
            "PasswordSecretArn": refs.accounting_password_secret_arn,
            "DatabaseName": accounting.database.name,
        }
        settings["CustomSlurmSettings"] += [{key: value} for key, value in slurm_conf_settings(accounting)]
    if no_egress:
        # Route 53 has no VPC endpoint: without egress the nodes resolve each other by EC2 hostnames.
        settings["Dns"] = {"DisableManagedDns": True, "UseEc2Hostnames": True}
    return settings


def kill_wait_s(cluster: ClusterSpec) -> int | None:
    """Slurm's KillWait: the longest stop (cluster.stop_save) at the shared file system's baseline throughput.
    None without shared storage (no checkpoint to wait for: Slurm's default 30 s stands)."""
    if cluster.fsx is None:
        return None
    return cluster.stop_save.kill_wait_s(cluster.fsx)


def health_floors_gib(cluster: ClusterSpec) -> tuple[int, int]:
    """The prolog's free-space floors (shared file system, node-local scratch), GiB: room for one stop's checkpoint
    on the shared file system, and for a container image and compile caches on scratch."""
    return math.ceil(cluster.stop_save.checkpoint_gb * 1e9 / 2**30), DEFAULT_MIN_SCRATCH_FREE_GIB


def compute_resource_name(queue: QueueSpec) -> str:
    return queue.instance_type.replace(".", "-")


def _queue(spec: DeploymentSpec, cluster: ClusterSpec, queue: QueueSpec, refs: ClusterRefs) -> dict[str, Any]:
    facts = instance_facts(queue.instance_type)
    resource: dict[str, Any] = {
        "Name": compute_resource_name(queue),
        "InstanceType": queue.instance_type,
        "MinCount": queue.min_count,
        "MaxCount": queue.max_count,
    }
    if queue.efa_enabled(facts.efa_capable):
        resource["Efa"] = {"Enabled": True}
    if queue.capacity.reservation_id is not None:
        resource["CapacityReservationTarget"] = {"CapacityReservationId": queue.capacity.reservation_id}
    if queue.placement_group is not None:
        placement: dict[str, Any] = {"Enabled": queue.placement_group}
        if queue.placement_group and queue.placement_group_name:
            placement["Name"] = queue.placement_group_name
        resource["Networking"] = {"PlacementGroup": placement}
    if facts.accelerator == "gpu":
        resource["HealthChecks"] = {"Gpu": {"Enabled": queue.gpu_health_checks}}

    if facts.accelerator == "neuron":
        script = refs.trn1_bootstrap_uri
        args = _trn1_args(spec, cluster, facts.efa_interfaces, facts.accelerators_per_node, refs)
    else:
        script, args = refs.gpu_bootstrap_uri, _gpu_args(cluster, facts.efa_interfaces, facts.accelerators_per_node)

    out: dict[str, Any] = {
        "Name": queue.name,
        "CapacityType": CAPACITY_TYPES[queue.capacity.type],
        "Networking": {"SubnetIds": [refs.compute_subnet_id], **_networking_groups(refs)},
        "ComputeSettings": {
            "LocalStorage": {"RootVolume": {"Size": queue.root_volume_gib, "Encrypted": True, "VolumeType": "gp3"}}
        },
        "Iam": {"InstanceRole": _queue_role_arn(spec, queue, refs)},
        "JobExclusiveAllocation": queue.job_exclusive_allocation,
        "CustomActions": {"OnNodeConfigured": {"Sequence": [{"Script": script, "Args": args}]}},
        "ComputeResources": [resource],
    }
    if queue.allowed_groups:
        # Slurm refuses other users' jobs here (and their srun/salloc), so only these groups' jobs run as the
        # queue's own role: who reads a dataset is who may submit to a queue whose role can (docs/security.md).
        out["CustomSlurmSettings"] = {"AllowGroups": ",".join(queue.allowed_groups)}
    if queue.allocation_strategy is not None:
        out["AllocationStrategy"] = queue.allocation_strategy
    if facts.accelerator == "neuron" and cluster.neuron is not None and cluster.neuron.custom_ami:
        out["Image"] = {"CustomAmi": cluster.neuron.custom_ami}
    return out


def _queue_role_arn(spec: DeploymentSpec, queue: QueueSpec, refs: ClusterRefs) -> str:
    """A queue with allowed_groups runs as its own role (deterministic, created by the identity stack)."""
    return spec.role_arn(f"{QUEUE_ROLE_PREFIX}{queue.name}") if queue.allowed_groups else refs.compute_instance_role_arn


def _gpu_args(cluster: ClusterSpec, efa_devices: int, gpus: int) -> list[str]:
    containers = cluster.containers
    return [
        "--gpus",
        str(gpus),
        "--efa-devices",
        str(efa_devices),
        "--pyxis",
        "true" if containers.pyxis else "false",
        "--enroot-dir",
        containers.enroot_local_dir,
        "--container-image",
        containers.nemo_image,
        "--python",
        f"python{cluster.python_version}",
        *_health_paths(cluster),
    ]


# ParallelCluster mounts the instance store (NVMe) of compute nodes here.
SCRATCH_DIR = "/scratch"


def _health_paths(cluster: ClusterSpec) -> list[str]:
    """Where the SLURM prolog checks free space: the shared file system and node-local scratch."""
    fsx_floor, scratch_floor = health_floors_gib(cluster)
    shared = ["--shared-dir", cluster.fsx.mount_dir, "--min-fsx-free-gib", str(fsx_floor)] if cluster.fsx else []
    return [*shared, "--scratch-dir", SCRATCH_DIR, "--min-scratch-free-gib", str(scratch_floor)]


def _trn1_args(
    spec: DeploymentSpec, cluster: ClusterSpec, efa_devices: int, chips: int, refs: ClusterRefs
) -> list[str]:
    neuron = cluster.neuron
    assert neuron is not None  # spec.platform.validators requires it for Trainium queues
    pins = neuron_pins(neuron)
    offline = spec.network.internet_egress == "none"
    args = [
        "--neuron-sdk",
        neuron.sdk_version,
        "--pins",
        ",".join(f"{name}={version}" for name, version in pins.items()),
        "--devices",
        str(chips),
        "--efa-devices",
        str(efa_devices),
        "--compile-cache",
        neuron.compile_cache_dir,
        "--offline",
        "true" if offline else "false",
    ]
    if not offline and refs.neuron_install_uri:
        args += ["--installer", refs.neuron_install_uri]
    # The NxDT stack: a no-op where the AMI has it (image_config --nxdt-wheelhouse), else installed at boot from
    # its wheelhouse in S3 (spec.artifacts; make upload-artifacts) by nxdt_install.sh, an asset beside the script.
    nxdt = artifact_locations(spec).nxdt_wheelhouse
    if nxdt is not None:
        args += ["--nxdt-wheelhouse", nxdt.uri]
        if refs.nxdt_install_uri:
            args += ["--nxdt-installer", refs.nxdt_install_uri]
    return [*args, *_health_paths(cluster)]


def _fsx(cluster: ClusterSpec) -> dict[str, Any]:
    fsx = cluster.fsx
    assert fsx is not None
    settings: dict[str, Any]
    if fsx.file_system_id is not None:
        settings = {"FileSystemId": fsx.file_system_id}
    else:
        settings = {
            "StorageCapacity": fsx.storage_gib,
            "DeploymentType": fsx.deployment_type,
            "DeletionPolicy": fsx.deletion_policy,
        }
        if fsx.throughput_mb_per_tib is not None:
            settings["PerUnitStorageThroughput"] = fsx.throughput_mb_per_tib
        if fsx.data_compression != "NONE":
            settings["DataCompressionType"] = fsx.data_compression
        retention = fsx.backup_retention_days()
        if retention:
            # The FSx API's default is 0 (no backups): a deleted file system or an rm -rf would lose every run.
            settings["AutomaticBackupRetentionDays"] = retention
            settings["CopyTagsToBackups"] = True
            if fsx.daily_automatic_backup_start_time is not None:
                settings["DailyAutomaticBackupStartTime"] = fsx.daily_automatic_backup_start_time
    return {"Name": FSX_NAME, "StorageType": "FsxLustre", "MountDir": fsx.mount_dir, "FsxLustreSettings": settings}


@user_errors
def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description="Print the ParallelCluster config of a spec (example references).")
    parser.add_argument("spec", nargs="?", help="spec YAML (default: the embedded default spec)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of YAML")
    args = parser.parse_args(argv)
    try:
        spec = load_spec(args.spec)
    except SpecError as error:
        print(error, file=sys.stderr)
        return 2
    if spec.cluster is None:
        print(f"{args.spec or 'default spec'}: cluster: None has no cluster section", file=sys.stderr)
        return 2
    config = build_cluster_config(spec, example_refs(spec))
    print(json.dumps(config, indent=2) if args.json else yaml.safe_dump(config, sort_keys=False), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
