"""EFA hardware counters, sampled on every node before and after a test, and what their differences say.

The sampler (fabric_sample_counters in lib.sh) writes one file per node: `<device> <path> <value>` lines, the path
relative to /sys/class/infiniband/<device>: `ports/1/hw_counters/tx_bytes` for the port's traffic and error
counters, `hw_counters/cmds_err` for the device's own. Counter names do not repeat between the two levels.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from spec.errors import UserError

# Bytes on the wire, every protocol (send/recv and RDMA) included.
TX_BYTES = "tx_bytes"
RX_BYTES = "rx_bytes"

# Growth means something broke: failed RDMA work requests, a peer that stopped answering, failed verbs calls.
ERROR_COUNTERS: tuple[str, ...] = (
    "rdma_read_wr_err",
    "rdma_write_wr_err",
    "retrans_timeout_events",
    "unresponsive_remote_events",
    "impaired_remote_conn_events",
    "cmds_err",
    "alloc_pd_err",
    "alloc_ucontext_err",
    "create_qp_err",
    "create_cq_err",
    "create_ah_err",
    "reg_mr_err",
    "mmap_err",
)
# Growth is reported, not failed: SRD retransmits lost packets by design; heavy loss shows in busbw anyway.
RETRANSMIT_COUNTERS: tuple[str, ...] = ("rx_drops", "retrans_pkts")


class SampleError(UserError):
    """A counter sample file that cannot be read; str() is one line naming the file."""


@dataclass(frozen=True)
class NodeSample:
    node: str
    sysfs_root: str
    devices: dict[str, dict[str, int]]  # device -> counter -> value


def read_sample(path: Path) -> NodeSample:
    root = ""
    devices: dict[str, dict[str, int]] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise SampleError(f"{path}: cannot read ({error.strerror})") from None
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("# sysfs "):
            root = line.removeprefix("# sysfs ").strip()
            continue
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 3 or not parts[2].isdigit():
            raise SampleError(f"{path}:{number}: {line!r} is not '<device> <counter path> <value>'")
        device, counter_path, value = parts
        devices.setdefault(device, {})[counter_path.rsplit("/", 1)[-1]] = int(value)
    return NodeSample(path.stem, root, devices)


def read_sysfs(root: Path, node: str = "") -> NodeSample:
    """What fabric_sample_counters writes, read straight from ROOT/class/infiniband (the EFA exporter's scrape)."""
    devices: dict[str, dict[str, int]] = {}
    infiniband = root / "class" / "infiniband"
    for device in sorted(infiniband.iterdir()) if infiniband.is_dir() else []:
        counters: dict[str, int] = {}
        for level in (device / "ports" / "1" / "hw_counters", device / "hw_counters"):
            for file in sorted(level.iterdir()) if level.is_dir() else []:
                try:
                    text = file.read_text(encoding="ascii").strip()
                except (OSError, UnicodeDecodeError):
                    continue  # a counter the driver refuses to read now is skipped, as the sampler skips it
                if text.isdigit():
                    counters[file.name] = int(text)
        devices[device.name] = counters
    return NodeSample(node, str(root), devices)


def read_samples(directory: Path) -> dict[str, NodeSample]:
    """Every node's sample in `directory` (<node>.txt), by node name."""
    return {path.stem: read_sample(path) for path in sorted(directory.glob("*.txt"))}


@dataclass(frozen=True)
class NodeDelta:
    node: str
    sysfs_root: str
    devices: dict[str, dict[str, int]]  # device -> counter -> after - before (counters present in both samples)
    backwards: tuple[str, ...] = ()  # "device counter" pairs that went down: a driver reload or reboot
    vanished: tuple[str, ...] = ()  # devices sampled before but not after
    appeared: tuple[str, ...] = ()  # devices sampled after but not before

    def total(self, counter: str) -> int:
        return sum(deltas.get(counter, 0) for deltas in self.devices.values())

    @property
    def tx_bytes(self) -> int:
        return self.total(TX_BYTES)

    @property
    def rx_bytes(self) -> int:
        return self.total(RX_BYTES)

    def idle_devices(self) -> list[str]:
        """Devices that neither sent nor received a byte."""
        return [
            device
            for device, deltas in sorted(self.devices.items())
            if deltas.get(TX_BYTES, 0) == 0 and deltas.get(RX_BYTES, 0) == 0
        ]

    def grown(self, counters: tuple[str, ...]) -> list[tuple[str, str, int]]:
        """(device, counter, growth) for each of `counters` that grew on some device."""
        return [
            (device, name, deltas[name])
            for device, deltas in sorted(self.devices.items())
            for name in counters
            if deltas.get(name, 0) > 0
        ]


def diff(before: NodeSample, after: NodeSample) -> NodeDelta:
    devices: dict[str, dict[str, int]] = {}
    backwards: list[str] = []
    for device in sorted(before.devices.keys() & after.devices.keys()):
        old, new = before.devices[device], after.devices[device]
        deltas: dict[str, int] = {}
        for name in sorted(old.keys() & new.keys()):
            delta = new[name] - old[name]
            if delta < 0:
                backwards.append(f"{device} {name}")
                delta = 0
            deltas[name] = delta
        devices[device] = deltas
    return NodeDelta(
        node=after.node,
        sysfs_root=after.sysfs_root or before.sysfs_root,
        devices=devices,
        backwards=tuple(backwards),
        vanished=tuple(sorted(before.devices.keys() - after.devices.keys())),
        appeared=tuple(sorted(after.devices.keys() - before.devices.keys())),
    )
