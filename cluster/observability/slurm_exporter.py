"""Slurm's queue and nodes as Prometheus metrics, read at scrape time from sinfo and squeue (head node).

Plain `-o` formats rather than `--json`: the JSON layout changed between Slurm releases (22.05's sinfo --json lists
nodes, 23.02's lists partitions), the format letters have not. Free text (reasons, job names) is the last field
or cannot hold the separator.
"""

from __future__ import annotations

import logging
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from spec.cli import OneLineParser, user_errors

log = logging.getLogger("slurm_exporter")

SEPARATOR = "\x1f"  # ASCII unit separator: never in a node, partition or user name
SINFO_FORMAT = SEPARATOR.join(("%N", "%T", "%P", "%o", "%c", "%E"))
SQUEUE_FORMAT = SEPARATOR.join(("%i", "%T", "%P", "%u", "%D", "%r", "%N", "%j"))
# sinfo's state suffixes: '*' not responding, '~' powered down, '#' powering up, '%' powering down, '!' pending
# power down, '$' maintenance reservation, '@' pending reboot, '^' rebooting, '-' planned.
STATE_FLAGS = "*~#%!$@^-"
PROBLEM_STATES = frozenset({"down", "drained", "draining", "fail", "failing", "not_responding"})

Runner = Callable[[Sequence[str]], str]


class SlurmQueryError(RuntimeError):
    """A Slurm command failed; one line naming the command."""


@dataclass(frozen=True)
class SlurmNode:
    name: str
    state: str  # long state, lower case, flags stripped: idle, allocated, mixed, drained, down, ...
    flags: str  # the stripped suffix characters
    partition: str  # the default partition loses its '*'
    address: str
    cpus: int
    reason: str  # "" for none

    @property
    def responding(self) -> bool:
        return "*" not in self.flags

    @property
    def powered_down(self) -> bool:
        """Cloud nodes ParallelCluster has not launched (or is launching): nothing to scrape there."""
        return "~" in self.flags or "#" in self.flags or "%" in self.flags


@dataclass(frozen=True)
class SlurmJob:
    job_id: str
    state: str  # lower case: pending, running, completing, ...
    partition: str
    user: str
    nodes: int
    reason: str
    node_list: str
    name: str


def run_command(argv: Sequence[str], timeout_s: float = 20.0, env: Mapping[str, str] | None = None) -> str:
    try:
        result = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            env=None if env is None else dict(env),
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise SlurmQueryError(f"{argv[0]}: {error}") from None
    if result.returncode != 0:
        detail = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:] or ["no output"]
        raise SlurmQueryError(f"{' '.join(argv[:2])} ... exited {result.returncode}: {detail[0]}")
    return result.stdout


def split_state(raw: str) -> tuple[str, str]:
    state = raw.strip().lower()
    flags = ""
    while state and state[-1] in STATE_FLAGS:
        flags = state[-1] + flags
        state = state[:-1]
    return state.replace(" ", "_"), flags


def parse_sinfo(text: str) -> list[SlurmNode]:
    nodes = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.split(SEPARATOR, 5)
        if len(fields) != 6:
            raise SlurmQueryError(f"sinfo: unexpected line {line!r}")
        name, raw_state, partition, address, cpus, reason = fields
        state, flags = split_state(raw_state)
        nodes.append(
            SlurmNode(
                name=name,
                state=state,
                flags=flags,
                partition=partition.rstrip("*"),
                address=address,
                cpus=int(cpus) if cpus.isdigit() else 0,
                reason="" if reason.strip() == "none" else reason.strip(),
            )
        )
    return nodes


def parse_squeue(text: str) -> list[SlurmJob]:
    jobs = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.split(SEPARATOR, 7)
        if len(fields) != 8:
            raise SlurmQueryError(f"squeue: unexpected line {line!r}")
        job_id, state, partition, user, nodes, reason, node_list, name = fields
        jobs.append(
            SlurmJob(
                job_id=job_id,
                state=state.strip().lower(),
                partition=partition,
                user=user,
                nodes=int(nodes) if nodes.isdigit() else 0,
                reason="" if reason in ("None", "(null)") else reason,
                node_list=node_list,
                name=name,
            )
        )
    return jobs


def query_nodes(runner: Runner = run_command) -> list[SlurmNode]:
    return parse_sinfo(runner(["sinfo", "--noheader", "--Node", "--format", SINFO_FORMAT]))


def query_jobs(runner: Runner = run_command) -> list[SlurmJob]:
    return parse_squeue(runner(["squeue", "--noheader", "--all", "--format", SQUEUE_FORMAT]))


def expand_hostlist(node_list: str, runner: Runner = run_command) -> list[str]:
    if not node_list or node_list == "(null)":
        return []
    return runner(["scontrol", "show", "hostnames", node_list]).split()


class SlurmCollector(Collector):
    """Queries Slurm on every scrape (a Prometheus agent scrapes every 30 s; sinfo and squeue take milliseconds)."""

    def __init__(self, runner: Runner = run_command) -> None:
        self.runner = runner

    def collect(self) -> Iterator[Metric]:
        started = time.monotonic()
        up = GaugeMetricFamily("slurm_up", "1 if sinfo and squeue answered on this scrape.")
        try:
            nodes = query_nodes(self.runner)
            jobs = query_jobs(self.runner)
        except SlurmQueryError as error:
            log.warning("%s", error)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from self._node_metrics(nodes)
        yield from self._job_metrics(jobs)
        duration = GaugeMetricFamily("slurm_scrape_duration_seconds", "Time sinfo and squeue took on this scrape.")
        duration.add_metric([], time.monotonic() - started)
        yield duration

    @staticmethod
    def _node_metrics(nodes: list[SlurmNode]) -> Iterator[Metric]:
        state = GaugeMetricFamily(
            "slurm_node_state",
            "1 for each node's current state (flags stripped); reason is why it is drained or down.",
            labels=["node", "partition", "state", "reason"],
        )
        responding = GaugeMetricFamily(
            "slurm_node_responding", "0 when slurmctld has not heard from the node lately (sinfo '*').", labels=["node"]
        )
        powered = GaugeMetricFamily(
            "slurm_node_powered_up", "0 for cloud nodes ParallelCluster has powered down.", labels=["node"]
        )
        counts: Counter[tuple[str, str]] = Counter()
        cpus: Counter[str] = Counter()
        seen: set[str] = set()
        for node in nodes:
            state.add_metric([node.name, node.partition, node.state, node.reason], 1)
            counts[(node.partition, node.state)] += 1
            cpus[node.partition] += node.cpus
            if node.name not in seen:  # a node in two partitions is listed twice
                seen.add(node.name)
                responding.add_metric([node.name], 1 if node.responding else 0)
                powered.add_metric([node.name], 0 if node.powered_down else 1)
        partition_nodes = GaugeMetricFamily(
            "slurm_partition_nodes", "Nodes of each partition by state.", labels=["partition", "state"]
        )
        for (partition, node_state), count in sorted(counts.items()):
            partition_nodes.add_metric([partition, node_state], count)
        partition_cpus = GaugeMetricFamily("slurm_partition_cpus", "CPUs of each partition.", labels=["partition"])
        for partition, count in sorted(cpus.items()):
            partition_cpus.add_metric([partition], count)
        yield from (state, responding, powered, partition_nodes, partition_cpus)

    @staticmethod
    def _job_metrics(jobs: list[SlurmJob]) -> Iterator[Metric]:
        by_state: Counter[tuple[str, str]] = Counter((job.partition, job.state) for job in jobs)
        queue = GaugeMetricFamily(
            "slurm_jobs", "Jobs in the queue by partition and state.", labels=["partition", "state"]
        )
        for (partition, job_state), count in sorted(by_state.items()):
            queue.add_metric([partition, job_state], count)
        pending = GaugeMetricFamily(
            "slurm_jobs_pending_reason", "Pending jobs by the reason they wait.", labels=["partition", "reason"]
        )
        reasons: Counter[tuple[str, str]] = Counter(
            (job.partition, job.reason or "none") for job in jobs if job.state == "pending"
        )
        for (partition, reason), count in sorted(reasons.items()):
            pending.add_metric([partition, reason], count)
        running = GaugeMetricFamily(
            "slurm_job_nodes",
            "Nodes held by each running job.",
            labels=["slurm_job_id", "slurm_job_name", "user", "partition"],
        )
        for job in jobs:
            if job.state == "running":
                running.add_metric([job.job_id, job.name, job.user, job.partition], job.nodes)
        yield from (queue, pending, running)


@user_errors
def main(argv: Sequence[str] | None = None) -> None:
    from cluster.observability.serve import serve_forever

    parser = OneLineParser(prog="python -m cluster.observability.slurm_exporter", description=__doc__)
    parser.add_argument("--port", type=int, default=9341)
    parser.add_argument("--address", default="0.0.0.0")
    args = parser.parse_args(argv)
    serve_forever(SlurmCollector(), args.address, args.port, "slurm exporter")


if __name__ == "__main__":
    main()
