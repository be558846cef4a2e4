"""The verdict: bus bandwidth against the instance type's floor, and the EFA counters as proof of the path taken.

A fast result alone proves little (eight GPUs on one host all-reduce over NVLink), and a slow one does not say
why. So the check also asks: did the ranks span the nodes, did each node's EFA devices carry at least the bytes
the all-reduce had to send between nodes, did every device take part, and did any error counter grow.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cluster.fabric.counters import ERROR_COUNTERS, RETRANSMIT_COUNTERS, NodeDelta, NodeSample, diff
from cluster.fabric.parsers import MIN_LARGEST_SIZE, NCCL_TESTS, NCCOM_TEST, CollectiveRun, format_bytes
from cluster.fabric.thresholds import BusbwThreshold, min_cross_node_bytes

# A node whose counters moved by less than this share of the required bytes did not use EFA for the test.
SILENT_SHARE = 0.01
_MAX_LISTED = 6

_NETWORK_RE = re.compile(r"NCCL INFO Using network (.+?)[ \t]*$", re.MULTILINE)
_PROVIDER_RE = re.compile(r"NET/OFI Selected [Pp]rovider is (\S+)")

SOCKETS_HINT = {
    NCCL_TESTS: "NCCL used sockets (check FI_PROVIDER, the aws-ofi-nccl plugin, the security group's self rule)",
    NCCOM_TEST: (
        "the Neuron runtime did not use EFA (check FI_PROVIDER=efa, aws-neuronx-collectives, "
        "the security group's self rule)"
    ),
}


@dataclass
class Verdict:
    title: str
    info: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures

    def render(self) -> str:
        lines = [f"fabric check: {self.title}"]
        lines += [f"  {line}" for line in self.info]
        lines += [f"WARNING: {line}" for line in self.warnings]
        lines += [f"FAIL: {line}" for line in self.failures]
        if self.passed:
            lines.append("fabric check: PASSED")
        else:
            count = len(self.failures)
            lines.append(f"fabric check: FAILED ({count} problem{'s' if count > 1 else ''})")
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Transports:
    """What NCCL_DEBUG=INFO logged per rank: the network plugin and the libfabric provider."""

    networks: Counter[str]
    providers: Counter[str]

    @property
    def logged(self) -> bool:
        return bool(self.networks or self.providers)


def read_transports(files: Iterable[Path]) -> Transports:
    networks: Counter[str] = Counter()
    providers: Counter[str] = Counter()
    for path in files:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        # One count per log file (one file per rank): the first mention decides.
        if match := _NETWORK_RE.search(text):
            networks[match.group(1)] += 1
        if match := _PROVIDER_RE.search(text):
            providers[match.group(1)] += 1
    return Transports(networks, providers)


def _list(items: list[str]) -> str:
    shown = ", ".join(items[:_MAX_LISTED])
    return shown + (f" and {len(items) - _MAX_LISTED} more" if len(items) > _MAX_LISTED else "")


@dataclass(frozen=True)
class CheckInputs:
    run: CollectiveRun
    threshold: BusbwThreshold
    before: Mapping[str, NodeSample]
    after: Mapping[str, NodeSample]
    output_path: str
    test_exit_code: int = 0
    iterations: int | None = None  # per size and placement; None: from the tool's header
    transports: Transports | None = None
    expected_ranks: int | None = None


def evaluate(inputs: CheckInputs) -> Verdict:
    run, threshold = inputs.run, inputs.threshold
    ranks = f", {run.ranks} ranks on {len(run.hosts)} hosts" if run.ranks else ""
    verdict = Verdict(f"{run.tool} on {threshold.nodes} x {threshold.instance.name}{ranks}")
    _check_run(inputs, verdict)
    _check_bandwidth(run, threshold, verdict)
    _check_counters(inputs, verdict)
    if inputs.transports is not None:
        _check_transports(inputs.transports, verdict)
    return verdict


def _check_run(inputs: CheckInputs, verdict: Verdict) -> None:
    run, tool = inputs.run, inputs.run.tool
    if inputs.test_exit_code != 0:
        verdict.failures.append(f"{tool} exited with status {inputs.test_exit_code} (output: {inputs.output_path})")
    for line in run.failures[:3]:
        verdict.failures.append(f"{tool} reported: {line}")
    if not run.sizes:
        verdict.failures.append(f"{tool} printed no result rows ({inputs.output_path})")
        return
    if not run.complete:
        verdict.failures.append(
            f"{tool} output ends after {len(run.sizes)} sizes without its 'Avg bus bandwidth' line "
            f"(the test crashed or was killed; see {inputs.output_path})"
        )
    wrong = sum(row.wrong for row in run.sizes) + (run.out_of_bounds or 0)
    if wrong:
        verdict.failures.append(f"{tool} found {wrong} wrong values after the all-reduce (data corruption)")
    if inputs.expected_ranks is not None and run.ranks is not None and run.ranks != inputs.expected_ranks:
        verdict.failures.append(
            f"{tool} ran {run.ranks} ranks, expected {inputs.expected_ranks} "
            f"({inputs.threshold.nodes} nodes x {inputs.expected_ranks // inputs.threshold.nodes} per node)"
        )
    if run.hosts and len(run.hosts) < inputs.threshold.nodes:
        verdict.failures.append(
            f"{tool} ranks ran on {len(run.hosts)} host(s) ({', '.join(run.hosts)}), not {inputs.threshold.nodes}: "
            "the test never crossed nodes"
        )


def _check_bandwidth(run: CollectiveRun, threshold: BusbwThreshold, verdict: Verdict) -> None:
    if not run.sizes:
        return
    largest = run.largest()
    if largest[-1].size_bytes < MIN_LARGEST_SIZE:
        verdict.failures.append(
            f"largest message measured is {format_bytes(largest[-1].size_bytes)}: bus bandwidth approaches line "
            f"rate only from {format_bytes(MIN_LARGEST_SIZE)}, so the run cannot be judged"
        )
        return
    measured = run.large_message_busbw()
    per_size = ", ".join(
        f"{format_bytes(row.size_bytes)} " + "/".join(f"{value:.1f}" for value in row.busbw_gb_per_s) for row in largest
    )
    verdict.info.append(
        f"busbw at the largest sizes (GB/s): {per_size}; median {measured:.1f}, "
        f"needs >= {threshold.min_busbw_gb_per_s:.1f} for {threshold.describe()}"
    )
    if run.avg_busbw_gb_per_s is not None:
        verdict.info.append(
            f"avg bus bandwidth over all sizes: {run.avg_busbw_gb_per_s:.2f} GB/s (small messages are latency-bound)"
        )
    if measured < threshold.min_busbw_gb_per_s:
        verdict.failures.append(
            f"busbw {measured:.1f} GB/s < {threshold.min_busbw_gb_per_s:.1f} GB/s expected for {threshold.describe()}"
        )


def _iterations(inputs: CheckInputs) -> int | None:
    per_placement = inputs.iterations if inputs.iterations is not None else inputs.run.timed_iterations
    return None if per_placement is None else per_placement * max(1, inputs.run.placements)


def _check_counters(inputs: CheckInputs, verdict: Verdict) -> None:
    run, threshold, tool = inputs.run, inputs.threshold, inputs.run.tool
    expected_devices = threshold.instance.efa_interfaces
    nodes = sorted(inputs.before.keys() | inputs.after.keys())
    for name in nodes:
        if name not in inputs.before:
            verdict.failures.append(f"{name}: no EFA counter sample from before the test (sampling failed there)")
        elif name not in inputs.after:
            verdict.failures.append(f"{name}: no EFA counter sample from after the test (sampling failed there)")
    if len(nodes) < threshold.nodes:
        verdict.failures.append(
            f"EFA counters sampled on {len(nodes)} node(s) ({', '.join(nodes) or 'none'}), expected {threshold.nodes}"
        )
    deltas = [diff(inputs.before[n], inputs.after[n]) for n in nodes if n in inputs.before and n in inputs.after]
    if threshold.intra_node:
        # NVLink only: EFA need not carry anything, but its devices must be there and report no errors.
        verdict.info.append("one node: the all-reduce runs over NVLink; EFA counters are checked for errors only")
        for delta in deltas:
            _check_devices(delta, expected_devices, threshold.instance.name, verdict)
            _check_errors(delta, verdict)
        return
    operations = _iterations(inputs)
    required = min_cross_node_bytes((row.size_bytes for row in run.sizes), threshold.nodes, operations or 0)
    if operations is None and run.sizes:
        verdict.failures.append(f"{tool}: iterations per size unknown; pass --iters to check the EFA counters")
    elif run.sizes:
        verdict.info.append(
            f"EFA bytes each node must exchange for this test: at least {format_bytes(required)} each way"
        )

    silent: list[str] = []
    for delta in deltas:
        count = len(delta.devices)
        verdict.info.append(
            f"{delta.node}: {count} EFA devices, tx {format_bytes(delta.tx_bytes)}, rx {format_bytes(delta.rx_bytes)}"
        )
        _check_devices(delta, expected_devices, threshold.instance.name, verdict)
        if not count:
            continue
        moved = min(delta.tx_bytes, delta.rx_bytes)
        if operations is None or not run.sizes:
            continue
        if moved < SILENT_SHARE * required:
            silent.append(delta.node)
        elif moved < required:
            verdict.failures.append(
                f"{delta.node}: EFA carried {format_bytes(delta.tx_bytes)} out and {format_bytes(delta.rx_bytes)} in, "
                f"less than the {format_bytes(required)} each way this test needs: part of it went another way "
                "(TCP sockets?)"
            )
        elif idle := delta.idle_devices():
            verdict.failures.append(
                f"{delta.node}: {len(idle)} of {count} EFA devices carried no traffic: {_list(idle)} "
                "(a rail down or unused; compare `fi_info -p efa` with the instance's interfaces)"
            )
    if silent:
        where = "" if len(silent) == len(deltas) else f" on {', '.join(silent)}"
        verdict.failures.append(f"EFA counters did not move{where}: {SOCKETS_HINT.get(tool, SOCKETS_HINT[NCCL_TESTS])}")
    for delta in deltas:
        _check_errors(delta, verdict)


def _check_devices(delta: NodeDelta, expected: int, instance: str, verdict: Verdict) -> None:
    root = f"{delta.sysfs_root or '/sys'}/class/infiniband"
    count = len(delta.devices)
    if count == 0:
        verdict.failures.append(f"{delta.node}: no EFA devices under {root} (EFA driver not loaded, or no EFA?)")
    elif count != expected:
        verdict.failures.append(f"{delta.node}: {count} EFA devices under {root}, expected {expected} for {instance}")
    if delta.vanished or delta.appeared:
        changed = [*delta.vanished, *delta.appeared]
        verdict.failures.append(f"{delta.node}: EFA devices changed during the test: {_list(changed)}")
    if delta.backwards:
        verdict.failures.append(
            f"{delta.node}: EFA counters went backwards ({_list(list(delta.backwards))}): "
            "the driver reloaded or the node rebooted during the test"
        )


def _check_errors(delta: NodeDelta, verdict: Verdict) -> None:
    if errors := delta.grown(ERROR_COUNTERS):
        listed = [f"{device} {name} +{growth}" for device, name, growth in errors]
        verdict.failures.append(f"{delta.node}: EFA error counters grew: {_list(listed)}")
    if retransmits := delta.grown(RETRANSMIT_COUNTERS):
        listed = [f"{device} {name} +{growth}" for device, name, growth in retransmits]
        verdict.warnings.append(
            f"{delta.node}: {_list(listed)} (SRD resends lost packets; many of them cost bandwidth)"
        )


def _check_transports(transports: Transports, verdict: Verdict) -> None:
    if not transports.logged:
        verdict.info.append("NCCL transport: not logged (NCCL_DEBUG=INFO prints it)")
        return
    networks = ", ".join(f"{name} on {count} ranks" for name, count in sorted(transports.networks.items()))
    providers = ", ".join(f"{name} on {count} ranks" for name, count in sorted(transports.providers.items()))
    verdict.info.append(f"NCCL network: {networks or 'not logged'}; libfabric provider: {providers or 'not logged'}")
    sockets = sum(count for name, count in transports.networks.items() if "socket" in name.lower())
    if sockets:
        verdict.failures.append(
            f"NCCL chose the Socket transport on {sockets} ranks: the aws-ofi-nccl plugin did not load "
            "(check LD_LIBRARY_PATH for libnccl-net, FI_PROVIDER=efa)"
        )
    other = sum(count for name, count in transports.providers.items() if name != "efa")
    if other:
        verdict.failures.append(f"libfabric picked a provider other than efa on {other} ranks (FI_PROVIDER=efa?)")
