"""Scrape targets found through Slurm, as Prometheus file_sd JSON: nodes come and go as ParallelCluster scales.

One file per scrape job (node.json, dcgm.json, efa.json, neuron.json, trainer.json), rewritten atomically on each
refresh; Prometheus re-reads file_sd files when they change. Powered-down cloud nodes are left out (nothing runs
there). The trainer's target is the first node of each running job, where rank 0 serves its endpoint.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster.observability.slurm_exporter import (
    Runner,
    SlurmJob,
    SlurmNode,
    SlurmQueryError,
    expand_hostlist,
    query_jobs,
    query_nodes,
    run_command,
)
from spec.cli import OneLineParser, user_errors
from spec.observability import ExporterPorts
from spec.platform.instances import instance_facts

log = logging.getLogger("targets")

NODE_JOBS = ("node", "dcgm", "efa", "neuron")
TARGET_FILES = (*NODE_JOBS, "trainer")


@dataclass(frozen=True)
class Roles:
    """The exporters a partition's nodes run besides the node exporter."""

    gpu: bool = False
    efa: bool = False
    neuron: bool = False

    def jobs(self) -> tuple[str, ...]:
        flags = {"dcgm": self.gpu, "efa": self.efa, "neuron": self.neuron}
        return ("node", *(job for job, on in flags.items() if on))


def partition_roles(spec: Any) -> dict[str, Roles]:
    """Each queue's exporters from its instance type (ParallelCluster names the partition after the queue)."""
    roles = {}
    for queue in spec.cluster.queues:
        facts = instance_facts(queue.instance_type)
        roles[queue.name] = Roles(
            gpu=facts.accelerator == "gpu",
            efa=queue.efa_enabled(facts.efa_capable),
            neuron=facts.accelerator == "neuron",
        )
    return roles


def parse_roles(items: Sequence[str]) -> dict[str, Roles]:
    """`partition=efa,gpu` command-line items (a local cluster has no spec queues)."""
    roles = {}
    for item in items:
        partition, _, names = item.partition("=")
        chosen = {name for name in names.split(",") if name}
        unknown = chosen - {"gpu", "efa", "neuron"}
        if not partition or unknown:
            raise ValueError(f"--roles: {item!r} is not PARTITION=gpu,efa,neuron")
        roles[partition] = Roles(gpu="gpu" in chosen, efa="efa" in chosen, neuron="neuron" in chosen)
    return roles


def target_groups(
    nodes: Sequence[SlurmNode],
    jobs: Sequence[SlurmJob],
    roles: Mapping[str, Roles],
    ports: ExporterPorts,
    first_host: Mapping[str, str],
) -> dict[str, list[dict[str, Any]]]:
    """file_sd groups per scrape job; `first_host` maps a running job's id to its first node's name."""
    groups: dict[str, list[dict[str, Any]]] = {name: [] for name in TARGET_FILES}
    addresses: dict[str, str] = {}
    seen: set[tuple[str, str]] = set()
    for node in nodes:
        addresses.setdefault(node.name, node.address)
        if node.powered_down:
            continue
        for exporter in roles.get(node.partition, Roles()).jobs():
            if (exporter, node.name) in seen:  # a node in two partitions
                continue
            seen.add((exporter, node.name))
            port = getattr(ports, exporter)
            labels = {"node": node.name, "partition": node.partition}
            groups[exporter].append({"targets": [f"{node.address}:{port}"], "labels": labels})
    for job in jobs:
        host = first_host.get(job.job_id)
        if job.state != "running" or host is None or host not in addresses:
            continue
        labels = {"node": host, "partition": job.partition, "slurm_job_id": job.job_id, "user": job.user}
        groups["trainer"].append({"targets": [f"{addresses[host]}:{ports.trainer}"], "labels": labels})
    return groups


def discover(
    roles: Mapping[str, Roles], ports: ExporterPorts, runner: Runner = run_command
) -> dict[str, list[dict[str, Any]]]:
    nodes = query_nodes(runner)
    jobs = query_jobs(runner)
    first_host = {}
    for job in jobs:
        if job.state == "running":
            hosts = expand_hostlist(job.node_list, runner)
            if hosts:
                first_host[job.job_id] = hosts[0]
    return target_groups(nodes, jobs, roles, ports, first_host)


def write_targets(directory: Path, groups: Mapping[str, list[dict[str, Any]]]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, entries in groups.items():
        path = directory / f"{name}.json"
        text = json.dumps(entries, indent=1, sort_keys=True) + "\n"
        if path.exists() and path.read_text() == text:
            continue  # unchanged: no reload
        temporary = path.with_suffix(f".json.{os.getpid()}.tmp")
        temporary.write_text(text)
        temporary.replace(path)


def refresh(directory: Path, roles: Mapping[str, Roles], ports: ExporterPorts, runner: Runner = run_command) -> bool:
    """One refresh; on a Slurm failure the last good files stay (a slurmctld restart must not empty the targets)."""
    try:
        write_targets(directory, discover(roles, ports, runner))
    except SlurmQueryError as error:
        log.warning("targets not refreshed: %s", error)
        return False
    return True


@user_errors
def main(argv: Sequence[str] | None = None) -> None:
    parser = OneLineParser(prog="python -m cluster.observability.targets", description=__doc__)
    parser.add_argument("--out", type=Path, required=True, help="directory of the file_sd JSON files")
    parser.add_argument("--spec", type=Path, help="deployment spec (queues -> exporters, ports)")
    parser.add_argument("--roles", nargs="*", default=[], help="PARTITION=gpu,efa,neuron (added to the spec's)")
    parser.add_argument("--trainer-port", type=int, help="override the spec's trainer port (local runs)")
    parser.add_argument("--every", type=float, default=0.0, help="refresh every N seconds (0: once)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="targets: %(message)s")
    roles: dict[str, Roles] = {}
    ports = ExporterPorts()
    if args.spec is not None:
        from spec import load_spec

        spec = load_spec(args.spec)
        roles = partition_roles(spec)
        ports = spec.observability.ports
    roles.update(parse_roles(args.roles))
    if args.trainer_port is not None:
        ports = ports.model_copy(update={"trainer": args.trainer_port})
    while True:
        ok = refresh(args.out, roles, ports)
        if args.every <= 0:
            raise SystemExit(0 if ok else 1)
        time.sleep(args.every)


if __name__ == "__main__":
    main()
