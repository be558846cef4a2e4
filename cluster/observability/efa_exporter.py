"""EFA hardware counters as Prometheus counters, read from sysfs at scrape time (EFA nodes).

The same counters the fabric check samples before and after its test (cluster/fabric/counters.py), classified
the same way: `kind="error"` counters growing means something broke, `kind="retransmit"` is SRD doing its job.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from cluster.fabric.counters import ERROR_COUNTERS, RETRANSMIT_COUNTERS, RX_BYTES, TX_BYTES, read_sysfs
from spec.cli import OneLineParser, user_errors


def counter_kind(name: str) -> str:
    if name in ERROR_COUNTERS:
        return "error"
    if name in RETRANSMIT_COUNTERS:
        return "retransmit"
    if name in (TX_BYTES, RX_BYTES) or name.endswith(("_bytes", "_pkts", "_wrs")):
        return "traffic"
    return "other"


class EfaCollector(Collector):
    def __init__(self, sysfs_root: Path = Path("/sys")) -> None:
        self.sysfs_root = sysfs_root

    def collect(self) -> Iterator[Metric]:
        sample = read_sysfs(self.sysfs_root)
        devices = GaugeMetricFamily("efa_devices", "EFA devices found in sysfs.")
        devices.add_metric([], len(sample.devices))
        yield devices
        counters = CounterMetricFamily(
            "efa_hw_counter",
            "EFA hardware counters (ports/1/hw_counters and the device's hw_counters), by device and counter.",
            labels=["device", "counter", "kind"],
        )
        for device, values in sorted(sample.devices.items()):
            for name, value in sorted(values.items()):
                counters.add_metric([device, name, counter_kind(name)], value)
        yield counters


@user_errors
def main(argv: Sequence[str] | None = None) -> None:
    from cluster.observability.serve import serve_forever

    parser = OneLineParser(prog="python -m cluster.observability.efa_exporter", description=__doc__)
    parser.add_argument("--port", type=int, default=9101)
    parser.add_argument("--address", default="0.0.0.0")
    parser.add_argument("--sysfs-root", type=Path, default=Path("/sys"))
    args = parser.parse_args(argv)
    serve_forever(EfaCollector(args.sysfs_root), args.address, args.port, "efa exporter")


if __name__ == "__main__":
    main()
