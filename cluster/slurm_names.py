"""The Slurm partitions, node names, features and GRES that ParallelCluster makes of our cluster config.

ParallelCluster's head node turns `Scheduling.SlurmQueues` into slurm.conf and gres.conf lines (its cookbook's
config generator; the facts, with file and commit, are in cluster/slurm_naming.json). This module
does the same for the config `cluster.config_builder` renders, so the repo can name nodes the way the cluster
will (`gpu-dy-p5-48xlarge-1`, ...) and stand up a local slurmctld shaped like the real one.

    python -m cluster.slurm_names [SPEC.yaml]

prints the partition, node and GRES lines for a spec.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

from cluster.config_builder import build_cluster_config, example_refs
from spec.cli import OneLineParser, user_errors
from spec.load import load_spec
from spec.model import DeploymentSpec
from spec.platform.instances import GPUS, instance_facts

RECORD = Path(__file__).resolve().parent / "slurm_naming.json"

NodeKind = Literal["static", "dynamic"]


@cache
def record() -> dict[str, Any]:
    """The versioned record of ParallelCluster's Slurm naming facts."""
    loaded: dict[str, Any] = json.loads(RECORD.read_text(encoding="utf-8"))
    return loaded


def fact(fact_id: str) -> dict[str, Any]:
    for item in record()["facts"]:
        if item["id"] == fact_id:
            found: dict[str, Any] = item
            return found
    raise KeyError(f"{RECORD.name}: no fact {fact_id!r}")


@dataclass(frozen=True)
class NodeRange:
    """One NodeName line: a compute resource's static or dynamic nodes."""

    queue: str
    compute_resource: str
    kind: NodeKind
    count: int
    instance_type: str
    cpus: int
    real_memory_mib: int
    features: tuple[str, ...]
    gpus: int  # NVIDIA GPUs per node (0: none)
    gpu_type: str | None
    gres_configured: bool  # False when the head node lacks the NVIDIA driver (--no-gpu)
    weight: int

    @property
    def prefix(self) -> str:
        return f"{self.queue}-{'st' if self.kind == 'static' else 'dy'}-{self.compute_resource}"

    @property
    def hostlist(self) -> str:
        return f"{self.prefix}-[1-{self.count}]"

    def names(self) -> list[str]:
        return [f"{self.prefix}-{index}" for index in range(1, self.count + 1)]

    @property
    def gres(self) -> str | None:
        """The node's Gres= value (`gpu:h100:8`), None when ParallelCluster writes none."""
        if self.gpus == 0 or not self.gres_configured:
            return None
        return f"gpu:{self.gpu_type}:{self.gpus}"

    def node_line(self) -> str:
        line = (
            f"NodeName={self.hostlist} CPUs={self.cpus} RealMemory={self.real_memory_mib} State=CLOUD "
            f"Feature={','.join(self.features)} Weight={self.weight}"
        )
        return f"{line} Gres={self.gres}" if self.gres else line

    def gres_line(self) -> str | None:
        if self.gres is None:
            return None
        return f"NodeName={self.hostlist} Name=gpu Type={self.gpu_type} File=/dev/nvidia[0-{self.gpus - 1}]"


@dataclass(frozen=True)
class Partition:
    """One queue as a Slurm partition."""

    name: str
    default: bool
    exclusive: bool
    ranges: tuple[NodeRange, ...]
    # The queue's CustomSlurmSettings, appended to its PartitionName line (fact exclusive_partition).
    options: tuple[tuple[str, str], ...] = ()

    @property
    def nodeset(self) -> str:
        return f"{self.name}_nodes"

    def node_names(self, kind: NodeKind | None = None) -> list[str]:
        return [name for node_range in self.ranges if kind in (None, node_range.kind) for name in node_range.names()]

    def lines(self) -> list[str]:
        """NodeName lines, the NodeSet and the PartitionName line, as the queue's partition file has them."""
        partition = f"PartitionName={self.name} Nodes={self.nodeset} MaxTime=INFINITE State=UP"
        if self.default:
            partition += " Default=YES"
        if self.exclusive:
            partition += " OverSubscribe=EXCLUSIVE"
        partition += "".join(f" {key}={value}" for key, value in self.options)
        return [
            *(node_range.node_line() for node_range in self.ranges),
            f"NodeSet={self.nodeset} Nodes={','.join(r.hostlist for r in self.ranges)}",
            partition,
        ]

    def gres_lines(self) -> list[str]:
        return [line for node_range in self.ranges if (line := node_range.gres_line()) is not None]


def _gpu(instance_type: str) -> tuple[int, str | None]:
    """GPUs per node and the GRES type: EC2's GPU name (a catalogue fact) lower-cased without spaces (fact gres_type)."""
    facts = instance_facts(instance_type)
    if facts.accelerator != "gpu":
        return 0, None
    gpu = GPUS.get(facts.gpu_device or "")
    if gpu is None or gpu.ec2_gpu_name is None:
        raise ValueError(
            f"{instance_type}: gpu_device {facts.gpu_device!r} has no ec2_gpu_name in spec/platform/instances.py "
            "(EC2's GpuInfo.Gpus[].Name, which ParallelCluster's GRES type comes from)"
        )
    return facts.accelerators_per_node, gpu.ec2_gpu_name.replace(" ", "").lower()


def _ranges(queue: str, resource: Mapping[str, Any], nvidia_driver: bool) -> list[NodeRange]:
    instance_type = str(resource["InstanceType"])
    facts = instance_facts(instance_type)
    gpus, gpu_type = _gpu(instance_type)
    weights: dict[str, int] = fact("node_weights")["defaults"]
    ratio = float(fact("real_memory")["ratio"])
    # Every instance type the spec allows is x86 with two threads per core.
    cpus = facts.vcpus // 2 if resource.get("DisableSimultaneousMultithreading") else facts.vcpus
    memory = resource.get("SchedulableMemory") or math.floor(facts.memory_gib * 1024 * ratio)
    efa = bool(resource.get("Efa", {}).get("Enabled", False))
    static = int(resource.get("MinCount", 0))
    dynamic = int(resource.get("MaxCount", 10)) - static
    ranges = []
    for kind, count in (("static", static), ("dynamic", dynamic)):
        if count <= 0:
            continue
        name = str(resource["Name"])
        features = (kind, instance_type, name, *(("efa",) if efa else ()), *(("gpu",) if gpus else ()))
        priority = resource.get("StaticNodePriority" if kind == "static" else "DynamicNodePriority", weights[kind])
        ranges.append(
            NodeRange(
                queue=queue,
                compute_resource=name,
                kind="static" if kind == "static" else "dynamic",
                count=count,
                instance_type=instance_type,
                cpus=cpus,
                real_memory_mib=int(memory),
                features=features,
                gpus=gpus,
                gpu_type=gpu_type,
                gres_configured=nvidia_driver,
                weight=int(priority),
            )
        )
    return ranges


# Queue CustomSlurmSettings that only add a partition option (fact exclusive_partition: appended as Key=Value): the
# spec's allowed_groups. Others (Feature, ...) touch node lines the record does not pin.
PARTITION_ONLY_SETTINGS = frozenset({"AllowGroups"})


def _refuse_custom_node_settings(queues: Sequence[Mapping[str, Any]]) -> None:
    """Queue and compute-resource CustomSlurmSettings change the lines; the record does not pin how at 3.16.

    3.16.1's CLI lets a compute resource set Feature there, which its cookbook merges into the generated feature
    list (fact custom_settings_deny_list, node_features.at_3_16); our configs set none, so say so rather than guess.
    A queue's partition-only options (PARTITION_ONLY_SETTINGS) are modelled.
    """
    for queue in queues:
        unmodelled = set(queue.get("CustomSlurmSettings", {})) - PARTITION_ONLY_SETTINGS
        owners = [f"queue {queue['Name']}"] if unmodelled else []
        owners += [
            f"compute resource {queue['Name']}/{resource['Name']}"
            for resource in queue["ComputeResources"]
            if resource.get("CustomSlurmSettings")
        ]
        if owners:
            raise ValueError(
                f"{', '.join(owners)}: CustomSlurmSettings on queues or compute resources are not modelled "
                f"(see {RECORD.name}, facts custom_settings_deny_list and node_features)"
            )


def partitions(config: Mapping[str, Any], nvidia_driver: bool = True) -> list[Partition]:
    """ParallelCluster's partitions for a ClusterConfiguration (what `build_cluster_config` returns)."""
    queues: Sequence[Mapping[str, Any]] = config["Scheduling"]["SlurmQueues"]
    _refuse_custom_node_settings(queues)
    return [
        Partition(
            name=str(queue["Name"]),
            default=index == 0,
            exclusive=bool(queue.get("JobExclusiveAllocation", False)),
            ranges=tuple(
                node_range
                for resource in queue["ComputeResources"]
                for node_range in _ranges(str(queue["Name"]), resource, nvidia_driver)
            ),
            options=tuple((str(key), str(value)) for key, value in queue.get("CustomSlurmSettings", {}).items()),
        )
        for index, queue in enumerate(queues)
    ]


def spec_partitions(spec: DeploymentSpec, nvidia_driver: bool = True) -> list[Partition]:
    """The partitions of the cluster the spec deploys (the config built with example references)."""
    return partitions(build_cluster_config(spec, example_refs(spec)), nvidia_driver)


def suspend_exc_nodes(parts: Sequence[Partition]) -> str | None:
    """SuspendExcNodes: every static range, or None when the cluster has no static nodes."""
    static = [r.hostlist for p in parts for r in p.ranges if r.kind == "static"]
    return ",".join(static) if static else None


def slurm_conf_lines(parts: Sequence[Partition]) -> list[str]:
    lines = [line for partition in parts for line in partition.lines()]
    excluded = suspend_exc_nodes(parts)
    return [*lines, f"SuspendExcNodes={excluded}"] if excluded else lines


def gres_conf_lines(parts: Sequence[Partition]) -> list[str]:
    return [line for partition in parts for line in partition.gres_lines()]


@user_errors
def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m cluster.slurm_names", description=__doc__.splitlines()[0])
    parser.add_argument("spec", nargs="?", help="deployment spec YAML (default: spec/default.yaml)")
    args = parser.parse_args(argv)
    parts = spec_partitions(load_spec(args.spec))
    print("# slurm.conf (partitions and nodes)")
    print("\n".join(slurm_conf_lines(parts)))
    print("# gres.conf")
    print("\n".join(gres_conf_lines(parts)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
