"""The observability stack on one host, from real parts: Debian's prometheus and prometheus-node-exporter, our
Slurm and EFA exporters, the file_sd targets refreshed from the local Slurm cluster, and PromQL against it.

Everything (ports, config, TSDB, logs) lives under one directory; nothing touches the system's Prometheus service.
Used by the tests (tests/launch/test_prometheus_slurm.py) and `make demo`.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cluster.observability.agent_config import RULES_FILE, dump, render
from cluster.observability.slurm_exporter import SlurmQueryError, run_command
from cluster.observability.targets import Roles, discover, write_targets
from cluster.verify.local_slurm.install import InstallError, apt_install
from spec.cli import OneLineParser, user_errors
from spec.errors import UserError
from spec.observability import ExporterPorts, ObservabilitySpec

PROMETHEUS_PACKAGES = ("prometheus", "prometheus-node-exporter")
PROMETHEUS_BINARIES = ("prometheus", "promtool", "prometheus-node-exporter")
NODE_EXPORTER = "prometheus-node-exporter"


class PrometheusError(RuntimeError):
    """The local stack could not start or answer; one line naming what failed."""


def ensure_prometheus() -> None:
    """Debian's prometheus (2.42) and prometheus-node-exporter (1.5), installed with apt-get when missing."""
    if any(shutil.which(name) is None for name in PROMETHEUS_BINARIES):
        apt_install(PROMETHEUS_PACKAGES)
    missing = [name for name in PROMETHEUS_BINARIES if shutil.which(name) is None]
    if missing:
        raise InstallError(f"still missing after install: {', '.join(missing)}")


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def wait_http(url: str, timeout_s: float, process: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            program = process.args[0] if isinstance(process.args, list | tuple) else process.args
            raise PrometheusError(f"{program!s} exited {process.returncode} before {url} answered")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except (urllib.error.URLError, OSError):
            time.sleep(0.2)
    raise PrometheusError(f"{url} did not answer in {timeout_s:.0f} s")


class LocalObservability:
    """Exporters, a target refresher thread and a Prometheus server; `with` starts and always stops them."""

    def __init__(
        self,
        directory: Path,
        slurm_env: Mapping[str, str],
        *,
        sysfs_root: Path | None = None,
        trainer_port: int | None = None,
        scrape_interval_seconds: int = 1,
        partition: str = "local",
    ) -> None:
        self.directory = directory.resolve()  # Prometheus reads file_sd paths relative to its config file
        self.slurm_env = {**os.environ, **slurm_env}
        self.sysfs_root = sysfs_root
        self.scrape_interval_seconds = scrape_interval_seconds
        prometheus, node, slurm, efa, trainer = free_ports(5)
        self.prometheus_port = prometheus
        self.ports = ExporterPorts(node=node, slurm=slurm, efa=efa, trainer=trainer_port or trainer)
        self.roles = {partition: Roles(efa=sysfs_root is not None)}
        self.targets_dir = self.directory / "targets"
        self._processes: list[subprocess.Popen[bytes]] = []
        self._stop = threading.Event()
        self._refresher: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.prometheus_port}"

    def _spawn(self, name: str, argv: list[str], env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
        log = (self.directory / f"{name}.log").open("wb")
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=dict(env or os.environ))
        self._processes.append(process)
        return process

    def refresh_targets(self) -> None:
        write_targets(
            self.targets_dir, discover(self.roles, self.ports, lambda argv: run_command(argv, env=self.slurm_env))
        )

    def _refresh_loop(self) -> None:
        while not self._stop.wait(self.scrape_interval_seconds):
            try:
                self.refresh_targets()
            except Exception as error:  # a failed refresh keeps the last targets, as on the cluster
                with (self.directory / "targets.log").open("a") as log:
                    log.write(f"{time.strftime('%H:%M:%S')} targets not refreshed: {error!r}\n")

    def start(self) -> None:
        ensure_prometheus()
        self.directory.mkdir(parents=True, exist_ok=True)
        python = sys.executable
        address = "127.0.0.1"
        exporters = [
            self._spawn(
                "node-exporter",
                [
                    NODE_EXPORTER,
                    f"--web.listen-address={address}:{self.ports.node}",
                    "--collector.disable-defaults",
                    "--collector.cpu",
                    "--collector.meminfo",
                    "--collector.loadavg",
                    "--collector.filesystem",
                    "--collector.netdev",
                    "--collector.diskstats",
                    "--collector.uname",
                ],
            ),
            self._spawn(
                "slurm-exporter",
                [
                    python,
                    "-m",
                    "cluster.observability.slurm_exporter",
                    "--address",
                    address,
                    "--port",
                    str(self.ports.slurm),
                ],
                self.slurm_env,
            ),
        ]
        if self.sysfs_root is not None:
            exporters.append(
                self._spawn(
                    "efa-exporter",
                    [
                        python,
                        "-m",
                        "cluster.observability.efa_exporter",
                        "--address",
                        address,
                        "--port",
                        str(self.ports.efa),
                        "--sysfs-root",
                        str(self.sysfs_root),
                    ],
                )
            )
        self.refresh_targets()
        config = render(
            ObservabilitySpec(ports=self.ports, managed_prometheus=False),
            cluster_name="local",
            targets_dir=self.targets_dir,
            slurm_exporter=f"{address}:{self.ports.slurm}",
            head_node_exporter=f"{address}:{self.ports.node}",
            rule_files=[RULES_FILE],
            scrape_interval_seconds=self.scrape_interval_seconds,
        )
        config_path = self.directory / "prometheus.yml"
        config_path.write_text(dump(config))
        prometheus = self._spawn(
            "prometheus",
            [
                "prometheus",
                f"--config.file={config_path}",
                f"--storage.tsdb.path={self.directory / 'tsdb'}",
                f"--web.listen-address={address}:{self.prometheus_port}",
                "--storage.tsdb.retention.time=1d",
                "--web.enable-remote-write-receiver",  # stands for AMP in the agent test
            ],
        )
        for exporter, port in zip(exporters, (self.ports.node, self.ports.slurm, self.ports.efa), strict=False):
            wait_http(f"http://{address}:{port}/metrics", 30, exporter)
        wait_http(f"{self.url}/-/ready", 60, prometheus)
        self._refresher = threading.Thread(target=self._refresh_loop, name="targets", daemon=True)
        self._refresher.start()

    def stop(self) -> None:
        self._stop.set()
        if self._refresher is not None:
            self._refresher.join(timeout=10)
        for process in reversed(self._processes):
            if process.poll() is None:
                process.terminate()
        for process in self._processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def __enter__(self) -> LocalObservability:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    # -- asking it ---------------------------------------------------------------------------------------------

    def api(self, path: str, **params: str) -> Any:
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                body = json.load(response)
        except urllib.error.HTTPError as error:
            body = json.load(error)
            raise PrometheusError(f"{path} {params}: {body.get('errorType')}: {body.get('error')}") from None
        return body["data"]

    def query(self, promql: str) -> list[dict[str, Any]]:
        return self.api("query", query=promql)["result"]

    def wait_for(self, promql: str, timeout_s: float = 60.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            result = self.query(promql)
            if result:
                return result
            time.sleep(0.5)
        raise PrometheusError(f"no result for {promql} in {timeout_s:.0f} s")

    def query_range(self, promql: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        return self.api("query_range", query=promql, start=str(start), end=str(end), step=str(step))["result"]

    def metric_names(self) -> set[str]:
        return set(self.api("label/__name__/values"))


# -- `python -m cluster.verify.local_observability watch --dir DIR -- COMMAND...` (make demo) ----------------------------

FINAL_SCRAPE_BOUND_S = 600  # at most this long at the end of the job for a scrape of its last values

SUMMARY_QUERIES = (
    "llm_train_tokens_per_second",
    "llm_train_loss",
    "llm_train_mfu_ratio",
    "llm_train_step",
    "llm_train_last_checkpoint_step",
)


def _labels(metric: Mapping[str, str]) -> str:
    shown = {key: value for key, value in metric.items() if key in ("slurm_job_id", "run", "node", "state")}
    return "{" + ", ".join(f'{key}="{value}"' for key, value in sorted(shown.items())) + "}"


def _key(metric: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """Series identity without the name (last_over_time keeps __name__, avg_over_time drops it)."""
    return tuple(sorted((k, v) for k, v in metric.items() if k != "__name__"))


def summarize(stack: LocalObservability, window: str = "1h") -> list[str]:
    """What the local Prometheus holds for the job(s) it scraped: last value and mean over the run."""
    lines = [
        f"metrics: a Prometheus on this host scraped the job ({stack.url}; config {stack.directory / 'prometheus.yml'})"
    ]
    for name in SUMMARY_QUERIES:
        last = stack.query(f"last_over_time({name}[{window}])")
        mean = {_key(item["metric"]): item["value"][1] for item in stack.query(f"avg_over_time({name}[{window}])")}
        for item in last:
            key = _key(item["metric"])
            value = float(item["value"][1])
            lines.append(f"  {name}{_labels(item['metric'])}  last {value:.6g}  mean {float(mean.get(key, 'nan')):.6g}")
    for item in stack.query('slurm_node_state{partition="local"} == 1'):
        lines.append(f"  slurm_node_state{_labels(item['metric'])}  1")
    lines.append(
        f'  query it yourself while it runs: curl -s {stack.url}/api/v1/query --data-urlencode "query=llm_train_tokens_per_second"'
    )
    return lines


def fixture_sysfs(root: Path, devices: int = 2) -> Path:
    """A made-up /sys with EFA devices (for pictures and demos only: the tests use their own fixture trees)."""
    from cluster.fabric.counters import ERROR_COUNTERS, RETRANSMIT_COUNTERS, RX_BYTES, TX_BYTES

    for index in range(devices):
        device = root / "class" / "infiniband" / f"rdmap{16 + index}s0"
        for level, names in (
            ("ports/1/hw_counters", (TX_BYTES, RX_BYTES, *RETRANSMIT_COUNTERS)),
            ("hw_counters", ERROR_COUNTERS),
        ):
            (device / level).mkdir(parents=True, exist_ok=True)
            for name in names:
                (device / level / name).write_text("0\n")
    return root


def _grow(sysfs: Path, stop: threading.Event) -> None:
    """Traffic on the fixture devices: bytes every second, a retransmit now and then."""
    tick = 0
    while not stop.wait(1.0):
        tick += 1
        for device in sorted((sysfs / "class" / "infiniband").iterdir()):
            for name, amount in (("tx_bytes", 3 << 28), ("rx_bytes", 3 << 28), ("retrans_pkts", tick % 7 == 0)):
                path = device / "ports" / "1" / "hw_counters" / name
                path.write_text(f"{int(path.read_text()) + int(amount)}\n")


def check_slurm_conf(value: str | None) -> None:
    """watch scrapes the local SLURM cluster through its clients, which find it by SLURM_CONF: it must be up."""
    start = "start the local cluster with `python -m cluster.verify.local_slurm up`, then `source .local-slurm/env.sh`"
    if not value:
        raise UserError(f"SLURM_CONF: unset; watch scrapes the local SLURM cluster: {start}")
    if not Path(value).is_file():
        raise UserError(f"SLURM_CONF: {value!r} is not a file; {start}")
    if shutil.which("scontrol") is None:
        raise UserError(f"SLURM_CONF: {value!r} cannot be checked: no scontrol on PATH; {start}")
    ping = subprocess.run(
        ["scontrol", "ping"], env={**os.environ, "SLURM_CONF": value}, capture_output=True, text=True, timeout=60
    )
    if ping.returncode != 0:
        raise UserError(f"SLURM_CONF: {value!r} names a cluster whose controller does not answer (not up); {start}")


@user_errors
def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = OneLineParser(prog="python -m cluster.verify.local_observability", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    watch = sub.add_parser("watch", help="run COMMAND (a job through the local SLURM) under a local Prometheus")
    watch.add_argument("--dir", type=Path, required=True, help="Prometheus config, TSDB and logs (emptied first)")
    watch.add_argument("--scrape-interval", type=int, default=2)
    watch.add_argument(
        "--efa-fixture", action="store_true", help="an EFA exporter on a made-up sysfs tree whose counters grow"
    )
    watch.add_argument("--screenshots", type=Path, help="draw the dashboards into DIR/dashboard-<name>.png at the end")
    watch.add_argument("argv", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    args = parser.parse_args(argv)
    command = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not command:
        parser.error("watch needs a command after --")
    check_slurm_conf(os.environ.get("SLURM_CONF"))
    shutil.rmtree(args.dir, ignore_errors=True)
    sysfs = fixture_sysfs(args.dir / "sys") if args.efa_fixture else None
    started = time.time()
    try:
        with LocalObservability(args.dir, {}, sysfs_root=sysfs, scrape_interval_seconds=args.scrape_interval) as stack:
            # The trainer holds its endpoint open at the end until this Prometheus has scraped its last values, so a
            # job shorter than the target refresh and a scrape interval is still seen (bounded for a hung scraper).
            env = {
                **os.environ,
                "LLM_TRAINER_METRICS_PORT": str(stack.ports.trainer),
                "LLM_TRAINER_FINAL_SCRAPE_S": str(FINAL_SCRAPE_BOUND_S),
            }
            traffic = threading.Thread(target=_grow, args=(sysfs, stack._stop), daemon=True) if sysfs else None
            if traffic is not None:
                traffic.start()
            status = subprocess.run(command, env=env, check=False).returncode
            time.sleep(args.scrape_interval)  # one more scrape of the node and Slurm exporters
            print("\n".join(summarize(stack)), flush=True)
            if args.screenshots is not None:
                from cluster.observability.dashboards import DASHBOARDS
                from cluster.verify.screenshots import render

                for name, build in DASHBOARDS.items():
                    path = args.screenshots / f"dashboard-{name}.png"
                    print(f"metrics: {render(build(), stack.query_range, started, time.time(), path)}")
    except (PrometheusError, InstallError, SlurmQueryError) as error:
        print(f"metrics: {error}", file=sys.stderr)
        return 1
    return status


if __name__ == "__main__":
    sys.exit(main())
