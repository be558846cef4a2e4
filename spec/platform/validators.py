"""Errors at synth time instead of after a 20-minute CloudFormation rollback.

Two layers, both returning `SpecProblem`s (one line each: path, value, message):

- `spec_problems`: rules over the spec's `cluster:` section and the network it lands in. They run
  from `spec.checks`, so `load_spec` refuses a bad spec.
- `config_problems`: the same hazards checked over the builder's ParallelCluster config dict, plus
  what only the deployment knows (security-group rules, subnet AZs). The cluster stack runs it on
  the config it is about to hand to the custom resource.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from spec.cluster import SLURM_MAX_KILL_WAIT_S, ClusterSpec, ContainersSpec, FsxSpec, QueueSpec, parse_version
from spec.errors import SpecProblem
from spec.platform.instances import GPUS, HEAD_NODE_TYPES, INSTANCE_TYPES, MIN_CUDA, InstanceFacts
from spec.platform.neuron import LAST_NXDT_RELEASE, NEURON_RELEASES, NXDT_FAMILIES

CAPACITY_BLOCK_MINIMUM_VERSION = (3, 8, 0)
FSX_THROUGHPUTS: dict[str, tuple[int, ...]] = {
    "PERSISTENT_2": (125, 250, 500, 1000),
    "PERSISTENT_1": (50, 100, 200),
}
RESERVED_CAPACITY_TYPES = ("odcr", "capacity_block")


# ---------------------------------------------------------------- spec-level rules


def spec_problems(
    cluster: ClusterSpec, *, availability_zone: str, internet_egress: str, prefix: str = "cluster"
) -> list[SpecProblem]:
    """Every cross-field problem of a cluster section, in the order a reader would fix them."""
    return [
        *_head_node(cluster, prefix),
        *_head_node_python(cluster, prefix),
        *_queues(cluster, availability_zone, prefix),
        *_neuron(cluster, internet_egress, prefix),
        *_containers(cluster, prefix),
        *_fsx(cluster.fsx, f"{prefix}.fsx"),
        *_stop_save(cluster, prefix),
        *_prices(cluster, prefix),
    ]


def _head_node(cluster: ClusterSpec, prefix: str) -> Iterator[SpecProblem]:
    name = cluster.head_node.instance_type
    path = f"{prefix}.head_node.instance_type"
    if name not in INSTANCE_TYPES:
        yield SpecProblem(
            path,
            f"is not in the facts table (spec/platform/instances.py); use one of {', '.join(HEAD_NODE_TYPES)}",
            name,
        )
    elif INSTANCE_TYPES[name].accelerator != "none":
        yield SpecProblem(path, "is an accelerated type; the head node needs a CPU type such as m6i.2xlarge", name)


# The Python versions the head node's bootstrap can get on each ParallelCluster OS without a custom AMI:
# head_node.sh installs a missing `python3.X` with dnf (Amazon Linux 2023's and RHEL 9 AppStream's
# python3.11/python3.12 packages); Ubuntu has no dnf, so only the interpreter its image ships counts
# (22.04: 3.10, below the training env's 3.11; 24.04: 3.12).
HEAD_NODE_PYTHONS: dict[str, tuple[str, ...]] = {
    "alinux2023": ("3.11", "3.12"),
    "rhel9": ("3.11", "3.12"),
    "rocky9": ("3.11", "3.12"),
    "ubuntu2204": (),
    "ubuntu2404": ("3.12",),
}


def _head_node_python(cluster: ClusterSpec, prefix: str) -> Iterator[SpecProblem]:
    """The head node boots cluster.os (or cluster.custom_ami): a queue's custom AMI never changes it, so the
    interpreter its bootstrap asks for must come with that OS."""
    if cluster.custom_ami is not None or cluster.python_version in HEAD_NODE_PYTHONS.get(cluster.os, ()):
        return
    offered = HEAD_NODE_PYTHONS.get(cluster.os, ())
    choices = [name for name, versions in HEAD_NODE_PYTHONS.items() if cluster.python_version in versions]
    yield SpecProblem(
        f"{prefix}.python_version",
        f"is not available on the head node's OS {cluster.os} "
        f"(it offers {', '.join(offered) or 'no supported Python'}; a queue's custom AMI does not change the "
        f"head node): use os {' or '.join(choices)}, or a cluster.custom_ami that has python{cluster.python_version}",
        cluster.python_version,
    )


def _queues(cluster: ClusterSpec, availability_zone: str, prefix: str) -> Iterator[SpecProblem]:
    first_index: dict[str, int] = {}
    for i, queue in enumerate(cluster.queues):
        path = f"{prefix}.queues[{i}]"
        if queue.name in first_index:
            yield SpecProblem(f"{path}.name", f"duplicates {prefix}.queues[{first_index[queue.name]}].name", queue.name)
        first_index.setdefault(queue.name, i)
        facts = INSTANCE_TYPES.get(queue.instance_type)
        if facts is None:
            known = ", ".join(name for name, f in INSTANCE_TYPES.items() if f.accelerator != "none")
            yield SpecProblem(
                f"{path}.instance_type",
                f"is not in the facts table (spec/platform/instances.py); known: {known}",
                queue.instance_type,
            )
        if queue.min_count > queue.max_count:
            yield SpecProblem(f"{path}.min_count", f"is larger than max_count ({queue.max_count})", queue.min_count)
        yield from _capacity(cluster, queue, path, availability_zone)
        if facts is not None:
            yield from _efa(queue, facts, path)


def _efa(queue: QueueSpec, facts: InstanceFacts, path: str) -> Iterator[SpecProblem]:
    if queue.efa and not facts.efa_capable:
        yield SpecProblem(f"{path}.efa", f"is true, but {facts.name} has no EFA interfaces", queue.efa)
        return
    efa = queue.efa_enabled(facts.efa_capable)
    if efa and queue.placement_group is None and queue.capacity.type != "capacity_block":
        yield SpecProblem(
            f"{path}.placement_group",
            f"must be set to true or false: queue '{queue.name}' uses EFA, and ParallelCluster refuses an EFA "
            "queue without an explicit placement-group decision (false suits ODCRs)",
            None,
        )
    if queue.placement_group_name is not None and queue.placement_group is False:
        yield SpecProblem(
            f"{path}.placement_group_name", "is set, but placement_group is false", queue.placement_group_name
        )


def _capacity(cluster: ClusterSpec, queue: QueueSpec, path: str, availability_zone: str) -> Iterator[SpecProblem]:
    capacity = queue.capacity
    cpath = f"{path}.capacity"
    if capacity.type in RESERVED_CAPACITY_TYPES:
        if capacity.reservation_id is None:
            yield SpecProblem(f"{cpath}.reservation_id", f"is required for capacity type '{capacity.type}'", None)
        if capacity.availability_zone is None:
            yield SpecProblem(
                f"{cpath}.availability_zone",
                f"is required for capacity type '{capacity.type}' (the reservation's AZ)",
                None,
            )
        elif capacity.availability_zone != availability_zone:
            yield SpecProblem(
                f"{cpath}.availability_zone",
                f"differs from network.availability_zone ({availability_zone}), the compute subnet's AZ; "
                "reserved instances launch only in the reservation's AZ",
                capacity.availability_zone,
            )
    else:
        for field in ("reservation_id", "availability_zone"):
            value = getattr(capacity, field)
            if value is not None:
                yield SpecProblem(f"{cpath}.{field}", "is only read for capacity types odcr and capacity_block", value)
    if capacity.type != "capacity_block":
        return
    if parse_version(cluster.parallelcluster_version) < CAPACITY_BLOCK_MINIMUM_VERSION:
        yield SpecProblem(
            f"{path[: path.index('.queues')]}.parallelcluster_version",
            f"must be 3.8.0 or newer for Capacity Blocks (queue '{queue.name}')",
            cluster.parallelcluster_version,
        )
    if queue.min_count != queue.max_count:
        yield SpecProblem(
            f"{path}.min_count",
            f"must equal max_count ({queue.max_count}) for a Capacity Block: its nodes are static for the block's life",
            queue.min_count,
        )
    if queue.max_count < 1 or queue.min_count < 1:
        yield SpecProblem(f"{path}.min_count", "must be greater than 0 for a Capacity Block", queue.min_count)
    if queue.allocation_strategy is not None:
        yield SpecProblem(
            f"{path}.allocation_strategy", "must be unset for a Capacity Block", queue.allocation_strategy
        )
    if queue.placement_group:
        yield SpecProblem(
            f"{path}.placement_group",
            "must be false for a Capacity Block: its capacity is already co-located, and a placement group "
            "causes insufficient-capacity errors",
            True,
        )


def _neuron(cluster: ClusterSpec, internet_egress: str, prefix: str) -> Iterator[SpecProblem]:
    trainium = [q for q in cluster.queues if (f := INSTANCE_TYPES.get(q.instance_type)) and f.accelerator == "neuron"]
    if not trainium:
        return
    neuron = cluster.neuron
    if neuron is None:
        yield SpecProblem(
            f"{prefix}.neuron",
            f"is required: queue '{trainium[0].name}' runs {trainium[0].instance_type} and needs a pinned Neuron SDK "
            "(cluster.neuron.sdk_version)",
            None,
        )
        return
    trn1 = [q for q in trainium if INSTANCE_TYPES[q.instance_type].family in NXDT_FAMILIES]
    if trn1 and parse_version(neuron.sdk_version)[:2] > LAST_NXDT_RELEASE:
        last = ".".join(map(str, LAST_NXDT_RELEASE))
        yield SpecProblem(
            f"{prefix}.neuron.sdk_version",
            f"is newer than Neuron {last}, the last release that ships NxD Training (NxDT), which trn1 queues train "
            f"with (queue '{trn1[0].name}'): Neuron moved training to native PyTorch (TorchNeuron) on trn2/trn3 "
            f"only; keep trn1 on {last} or older",
            neuron.sdk_version,
        )
        return
    if neuron.packages is None and neuron.sdk_version not in NEURON_RELEASES:
        yield SpecProblem(
            f"{prefix}.neuron.sdk_version",
            f"has no pins in spec/platform/neuron.py (known: {', '.join(NEURON_RELEASES)}); set cluster.neuron.packages",
            neuron.sdk_version,
        )
    if internet_egress == "none" and neuron.custom_ami is None and cluster.custom_ami is None:
        yield SpecProblem(
            f"{prefix}.neuron.custom_ami",
            "is required because network.internet_egress is 'none': trn1 nodes cannot reach Neuron's package "
            "repositories; build the AMI from cluster/bootstrap/neuron-image.yaml with pcluster build-image",
            None,
        )
    if cluster.fsx is None:
        yield SpecProblem(
            f"{prefix}.neuron.compile_cache_dir",
            "needs shared storage, but cluster.fsx is not set",
            neuron.compile_cache_dir,
        )
    elif not _is_under(neuron.compile_cache_dir, cluster.fsx.mount_dir):
        yield SpecProblem(
            f"{prefix}.neuron.compile_cache_dir",
            f"must lie under the FSx mount ({cluster.fsx.mount_dir}) so every node reuses compiled graphs",
            neuron.compile_cache_dir,
        )


def _containers(cluster: ClusterSpec, prefix: str) -> Iterator[SpecProblem]:
    """The NeMo container's CUDA must have kernels for every GPU queue's compute capability."""
    framework = cluster.containers.framework
    for queue in cluster.queues:
        facts = INSTANCE_TYPES.get(queue.instance_type)
        if facts is None or facts.gpu_device is None:
            continue
        gpu = GPUS[facts.gpu_device]
        needed = MIN_CUDA.get(gpu.compute_capability, (0, 0))
        if framework.cuda >= needed:
            continue
        default = ContainersSpec()  # the default framework is the newest the spec offers
        major, minor = gpu.compute_capability
        yield SpecProblem(
            f"{prefix}.containers.nemo_framework",
            f"carries CUDA {_dotted(framework.cuda)}, too old for queue '{queue.name}' ({facts.name}, {gpu.label}, "
            f"sm_{major}{minor} needs CUDA {_dotted(needed)} or newer); use {default.nemo_framework} "
            f"(CUDA {_dotted(default.framework.cuda)})",
            cluster.containers.nemo_framework,
        )


def _dotted(version: tuple[int, int]) -> str:
    return ".".join(map(str, version))


def _is_under(path: str, directory: str) -> bool:
    directory = directory.rstrip("/")
    return path.rstrip("/").startswith(directory + "/")


def _fsx(fsx: FsxSpec | None, path: str) -> Iterator[SpecProblem]:
    if fsx is None or fsx.file_system_id is not None:
        return
    yield from _fsx_backups(fsx, path)
    size = fsx.storage_gib
    if not (size == 1200 or size % 2400 == 0):
        yield SpecProblem(f"{path}.storage_gib", f"must be 1200 or a multiple of 2400 for {fsx.deployment_type}", size)
    allowed = FSX_THROUGHPUTS.get(fsx.deployment_type)
    throughput = fsx.throughput_mb_per_tib
    if allowed is None:
        if throughput is not None:
            yield SpecProblem(
                f"{path}.throughput_mb_per_tib", f"must be unset (null) for {fsx.deployment_type}", throughput
            )
    elif throughput not in allowed:
        yield SpecProblem(
            f"{path}.throughput_mb_per_tib",
            f"must be one of {', '.join(map(str, allowed))} for {fsx.deployment_type}",
            throughput,
        )


def _fsx_backups(fsx: FsxSpec, path: str) -> Iterator[SpecProblem]:
    """ParallelCluster's FsxBackupOptionsValidator, at load time: backups exist only on PERSISTENT file systems."""
    retention = fsx.automatic_backup_retention_days
    if retention and fsx.deployment_type.startswith("SCRATCH"):
        yield SpecProblem(
            f"{path}.automatic_backup_retention_days",
            f"must be 0 or unset for {fsx.deployment_type}: FSx backs up only PERSISTENT file systems",
            retention,
        )
    if fsx.daily_automatic_backup_start_time is not None and fsx.backup_retention_days() == 0:
        yield SpecProblem(
            f"{path}.daily_automatic_backup_start_time",
            "needs automatic backups (automatic_backup_retention_days above 0)",
            fsx.daily_automatic_backup_start_time,
        )


def _stop_save(cluster: ClusterSpec, prefix: str) -> Iterator[SpecProblem]:
    """The stop must fit Slurm's KillWait limit, and its checkpoint (the prolog's floor) the file system."""
    fsx, stop = cluster.fsx, cluster.stop_save
    if fsx is None:
        return
    path = f"{prefix}.stop_save.checkpoint_gb"
    seconds = stop.seconds(fsx)
    if seconds > SLURM_MAX_KILL_WAIT_S:
        yield SpecProblem(
            path,
            f"takes {seconds:.0f} s to stop at {fsx.baseline_mb_per_s():.0f} MB/s, past Slurm's KillWait limit of "
            f"{SLURM_MAX_KILL_WAIT_S} s; raise cluster.fsx.throughput_mb_per_tib or storage_gib",
            stop.checkpoint_gb,
        )
    if fsx.file_system_id is None and stop.checkpoint_gb * 1e9 >= fsx.storage_gib * 2**30:
        yield SpecProblem(
            path,
            f"does not fit cluster.fsx.storage_gib {fsx.storage_gib}: the prolog keeps one checkpoint's room free",
            stop.checkpoint_gb,
        )


def _prices(cluster: ClusterSpec, prefix: str) -> Iterator[SpecProblem]:
    for name in cluster.prices:
        if name not in INSTANCE_TYPES:
            yield SpecProblem(f"{prefix}.prices.{name}", "is not in the facts table (spec/platform/instances.py)", name)


# ---------------------------------------------------------------- config-level rules


def config_problems(
    config: Mapping[str, Any],
    *,
    security_groups: Mapping[str, Mapping[str, Any]] | None = None,
    subnet_azs: Mapping[str, str] | None = None,
    reservation_azs: Mapping[str, str] | None = None,
) -> list[SpecProblem]:
    """Check a ParallelCluster config dict (the builder's output).

    security_groups: id -> description in EC2 DescribeSecurityGroups' shape (IpPermissions,
    IpPermissionsEgress with UserIdGroupPairs); ids may be CDK tokens, compared as strings.
    subnet_azs / reservation_azs: id -> availability zone.
    """
    problems: list[SpecProblem] = []
    queues = config.get("Scheduling", {}).get("SlurmQueues", [])
    for i, queue in enumerate(queues):
        qpath = f"Scheduling.SlurmQueues[{i}]"
        efa_queue = False
        for j, resource in enumerate(queue.get("ComputeResources", [])):
            rpath = f"{qpath}.ComputeResources[{j}]"
            efa = bool(resource.get("Efa", {}).get("Enabled"))
            efa_queue = efa_queue or efa
            problems += _config_resource(queue, resource, qpath, rpath, efa)
            if subnet_azs is not None and reservation_azs is not None:
                problems += _config_reservation_az(queue, resource, qpath, rpath, subnet_azs, reservation_azs)
        if efa_queue and security_groups is not None:
            problems += _config_efa_security_group(queue, qpath, security_groups)
    return problems


def _config_resource(
    queue: Mapping[str, Any], resource: Mapping[str, Any], qpath: str, rpath: str, efa: bool
) -> list[SpecProblem]:
    problems: list[SpecProblem] = []
    capacity_block = queue.get("CapacityType") == "CAPACITY_BLOCK"
    placement = resource.get("Networking", {}).get("PlacementGroup") or queue.get("Networking", {}).get(
        "PlacementGroup"
    )
    if efa and not capacity_block and placement is None:
        problems.append(
            SpecProblem(
                f"{rpath}.Networking.PlacementGroup",
                "must be explicit for an EFA compute resource (Enabled: true or false)",
                None,
            )
        )
    if not capacity_block:
        return problems
    min_count, max_count = resource.get("MinCount", 0), resource.get("MaxCount", 10)
    if min_count != max_count:
        problems.append(
            SpecProblem(f"{rpath}.MinCount", f"must equal MaxCount ({max_count}) for a Capacity Block", min_count)
        )
    if min_count < 1:
        problems.append(SpecProblem(f"{rpath}.MinCount", "must be greater than 0 for a Capacity Block", min_count))
    instances = resource.get("Instances")
    if instances is not None and len(instances) != 1:
        types = [item.get("InstanceType") for item in instances]
        problems.append(
            SpecProblem(f"{rpath}.Instances", "must hold exactly one instance type for a Capacity Block", types)
        )
    if "AllocationStrategy" in queue:
        problems.append(
            SpecProblem(
                f"{qpath}.AllocationStrategy", "must be unset for a Capacity Block", queue["AllocationStrategy"]
            )
        )
    target = resource.get("CapacityReservationTarget") or queue.get("CapacityReservationTarget") or {}
    if "CapacityReservationId" not in target:
        problems.append(
            SpecProblem(
                f"{rpath}.CapacityReservationTarget.CapacityReservationId", "is required for a Capacity Block", None
            )
        )
    if placement and placement.get("Enabled"):
        problems.append(
            SpecProblem(f"{rpath}.Networking.PlacementGroup.Enabled", "must be false for a Capacity Block", True)
        )
    return problems


def _config_reservation_az(
    queue: Mapping[str, Any],
    resource: Mapping[str, Any],
    qpath: str,
    rpath: str,
    subnet_azs: Mapping[str, str],
    reservation_azs: Mapping[str, str],
) -> list[SpecProblem]:
    target = resource.get("CapacityReservationTarget") or queue.get("CapacityReservationTarget") or {}
    reservation = target.get("CapacityReservationId")
    if reservation is None:
        return []
    reservation_az = reservation_azs.get(reservation)
    if reservation_az is None:
        return [SpecProblem(f"{rpath}.CapacityReservationTarget.CapacityReservationId", "has no known AZ", reservation)]
    problems = []
    for k, subnet in enumerate(queue.get("Networking", {}).get("SubnetIds", [])):
        subnet_az = subnet_azs.get(subnet)
        if subnet_az != reservation_az:
            problems.append(
                SpecProblem(
                    f"{qpath}.Networking.SubnetIds[{k}]",
                    f"is in {subnet_az or 'an unknown AZ'}, but capacity reservation {reservation} is in {reservation_az}",
                    subnet,
                )
            )
    return problems


def _config_efa_security_group(
    queue: Mapping[str, Any], qpath: str, security_groups: Mapping[str, Mapping[str, Any]]
) -> list[SpecProblem]:
    networking = queue.get("Networking", {})
    if not networking.get("SecurityGroups"):
        # Without SecurityGroups, ParallelCluster creates its managed compute group, which has the self rule.
        return []
    group_ids: Sequence[str] = [*networking["SecurityGroups"], *networking.get("AdditionalSecurityGroups", [])]
    key = "SecurityGroups"
    unknown = [group for group in group_ids if group not in security_groups]
    if unknown:
        return [SpecProblem(f"{qpath}.Networking.{key}", "names security groups with no description to check", unknown)]
    if any(allows_all_traffic_with_itself(group, security_groups[group]) for group in group_ids):
        return []
    return [
        SpecProblem(
            f"{qpath}.Networking.{key}",
            "has no group that allows all traffic in from and out to itself; EFA needs that self rule",
            list(group_ids),
        )
    ]


def allows_all_traffic_with_itself(group_id: str, description: Mapping[str, Any]) -> bool:
    """True when the group has an all-protocol rule naming itself, both inbound and outbound."""

    def self_rule(permissions: Sequence[Mapping[str, Any]]) -> bool:
        return any(
            str(rule.get("IpProtocol")) == "-1"
            and any(pair.get("GroupId") == group_id for pair in rule.get("UserIdGroupPairs", []))
            for rule in permissions
        )

    return self_rule(description.get("IpPermissions", [])) and self_rule(description.get("IpPermissionsEgress", []))
