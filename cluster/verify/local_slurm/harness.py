"""A real SLURM cluster on one host: our own munged, one slurmctld and one slurmd per node (Debian slurm-wlm).

Everything lives under a state directory (default `.local-slurm/` in the repo): munge key and socket,
slurm.conf, spool, pid files, logs, per-node health settings, a stand-in for /fsx and per-node scratch.
Client commands need `SLURM_CONF=<state>/slurm.conf` (see `env()`, or `source <state>/env.sh`).

With an `AccountingSpec` the cluster also runs slurmdbd on its own MariaDB server (datadir, socket and port
of its own under the state directory, never the host's service), with the spec's slurm.conf settings
(cluster.accounting), so sacct, sacctmgr and sshare answer as on the real head node.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import string
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cluster.accounting import slurm_conf_settings
from cluster.health.facts import HealthSettings
from cluster.verify.local_slurm.install import ensure_accounting, ensure_slurm
from spec.accounting import AccountingSpec

REPO_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_STATE_DIR = REPO_ROOT / ".local-slurm"
TEMPLATE = Path(__file__).with_name("slurm.conf.template")
HEALTH_DIR = REPO_ROOT / "cluster" / "health"

PARTITION = "local"
DEFAULT_NODES: tuple[str, ...] = ("n1", "n2")
# Node states (sinfo %T, lower case, trailing flags such as '*' or '~' stripped) that count as up.
RESPONDING_STATES = frozenset({"idle", "allocated", "mixed", "completing", "drained", "draining"})


# One `Key=value` pair of scontrol's one-line output; a value runs up to the next ` Key=`.
_FIELD_RE = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=(.*?)(?=\s+[A-Za-z][A-Za-z0-9_:/]*=|$)")


class LocalSlurmError(RuntimeError):
    """The local cluster could not be started or queried; one line naming what failed."""


@dataclass(frozen=True)
class NodeState:
    name: str
    state: str  # sinfo's long state, lower case, flags stripped: "idle", "drained", "allocated", ...
    reason: str
    responding: bool = True  # sinfo marks a node slurmctld has not heard from lately with '*'


def _free_ports(count: int) -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _pid_alive(pid: int, command: str) -> bool:
    """True when `pid` runs `command` (guards against a recycled pid from a stale pid file)."""
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    zombie = stat.rsplit(")", 1)[-1].split()[0] == "Z"
    return comm == command[:15] and not zombie


class LocalSlurm:
    """One local cluster, identified by its state directory."""

    def __init__(
        self,
        state_dir: Path | str = DEFAULT_STATE_DIR,
        nodes: Sequence[str] = DEFAULT_NODES,
        accounting: AccountingSpec | None = None,
        partition: str = PARTITION,
        cpus_per_node: int = 1,
        gpus_per_node: int = 0,
    ) -> None:
        """partition and cpus_per_node shape the cluster like a spec's queue (its name; one CPU per GPU, so an
        --exclusive job gets as many as the queue's instances have GPUs); Slurm takes the CPU count on trust.
        gpus_per_node declares that many stand-in GPUs per node (GRES gpu, no real devices), so jobs can request
        them and accounting counts them (gres/gpu) as on a GPU queue."""
        self.state_dir = Path(state_dir).resolve()
        self.nodes = tuple(nodes)
        self.partition = partition
        self.cpus_per_node = cpus_per_node
        self.gpus_per_node = gpus_per_node
        self.accounting = accounting if accounting is not None and accounting.enabled else None
        if not self.nodes:
            raise LocalSlurmError("nodes: at least one node is needed")

    # ----- paths -----
    @property
    def conf_path(self) -> Path:
        return self.state_dir / "slurm.conf"

    @property
    def run_dir(self) -> Path:
        return self.state_dir / "run"

    @property
    def log_dir(self) -> Path:
        return self.state_dir / "log"

    @property
    def fsx_dir(self) -> Path:
        """Stands in for the cluster's /fsx: shared by every local node."""
        return self.state_dir / "fsx"

    @property
    def drain_requests_dir(self) -> Path:
        """The spool of jobs' drain requests that the epilog reads (cluster/health/epilog.sh): on the shared file
        system, root's, sticky, writable and not listable by users (mode 1733), as head_node.sh makes it on /fsx."""
        return self.fsx_dir / ".slurm" / "drain-requests"

    def scratch_dir(self, node: str) -> Path:
        return self.state_dir / "scratch" / node

    def health_config(self, node: str) -> Path:
        return self.state_dir / "health" / f"{node}.env"

    @property
    def munge_socket(self) -> Path:
        """munged wants every directory above its socket world-traversable (a pytest tmp dir is not), and
        socket paths are short: so the socket lives under /run, in a directory named after the state dir."""
        digest = hashlib.sha1(str(self.state_dir).encode()).hexdigest()[:16]
        return Path("/run/local-slurm") / digest / "munge.socket"

    @property
    def spool_dir(self) -> Path:
        """Job and node state. slurmstepd binds Unix sockets under SlurmdSpoolDir (108 bytes at most), which a
        pytest worker's tmp folder can exceed: so beside the munge socket, under /run."""
        return self.munge_socket.parent / "spool"

    @property
    def mysql_dir(self) -> Path:
        return self.state_dir / "mysql"

    @property
    def mysql_socket(self) -> Path:
        return self.munge_socket.parent / "mysql.sock"

    def _pid_files(self) -> list[tuple[str, Path]]:
        """(command, pid file) in stop order: nodes first, then slurmctld, slurmdbd, its database, munged."""
        accounting_pids = [("slurmdbd", self.run_dir / "slurmdbd.pid"), ("mariadbd", self.run_dir / "mariadbd.pid")]
        # A handle made without the spec (`python -m cluster.verify.local_slurm down`) still stops an accounting cluster.
        started_with_accounting = any(path.exists() for _, path in accounting_pids)
        accounting = accounting_pids if self.accounting or started_with_accounting else []
        return [
            *(("slurmd", self.run_dir / f"slurmd-{node}.pid") for node in self.nodes),
            ("slurmctld", self.run_dir / "slurmctld.pid"),
            *accounting,
            ("munged", self.run_dir / "munged.pid"),
        ]

    def env(self) -> dict[str, str]:
        """Environment for SLURM client commands (sbatch, squeue, ...) against this cluster; a job submitted with it
        finds the drain-request spool in LLM_DRAIN_REQUESTS (its nodes have no /etc/llm-health/health.env)."""
        return {**os.environ, "SLURM_CONF": str(self.conf_path), "LLM_DRAIN_REQUESTS": str(self.drain_requests_dir)}

    # ----- daemons -----
    def running_daemons(self) -> dict[str, int]:
        alive: dict[str, int] = {}
        for command, pid_file in self._pid_files():
            try:
                pid = int(pid_file.read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
            if _pid_alive(pid, command):
                alive[pid_file.stem] = pid
        return alive

    def is_up(self) -> bool:
        return len(self.running_daemons()) == len(self._pid_files())

    def up(self, timeout_s: float = 300.0) -> None:
        """Start the cluster (idempotent: a running cluster is left as it is) and wait for every node."""
        if self.is_up():
            self.wait_responding(timeout_s)
            return
        ensure_slurm()
        if self.accounting:
            ensure_accounting()
        self.down()  # a half-started cluster: stop what runs, start clean
        self._prepare()
        self._start_munged()
        if self.accounting:
            self._start_database(timeout_s)
            self._start(["slurmdbd"], "slurmdbd")
            self._wait_for_slurmdbd(timeout_s)
        self._start(["slurmctld", "-f", str(self.conf_path)], "slurmctld")
        for node in self.nodes:
            self._start(["slurmd", "-f", str(self.conf_path), "-N", node], f"slurmd-{node}")
        self.wait_idle(timeout_s)

    def down(self, timeout_s: float = 20.0) -> None:
        """Stop every daemon by its pid file and remove the spool (job and node state); keeps logs and config."""
        if "slurmctld" in self.running_daemons():
            self._cancel_jobs()
        for command, pid_file in self._pid_files():
            try:
                pid = int(pid_file.read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
            if _pid_alive(pid, command):
                self._stop(pid, command, timeout_s)
            pid_file.unlink(missing_ok=True)
        self._kill_leftover_steps()
        shutil.rmtree(self.spool_dir, ignore_errors=True)
        shutil.rmtree(self.munge_socket.parent, ignore_errors=True)

    def reset(self, timeout_s: float = 300.0) -> None:
        """Back to a clean cluster: no jobs, passing health settings, every node resumed and idle."""
        self._cancel_jobs()
        for node in self.nodes:
            self.reset_health(node)
        self.resume_all()
        self.wait_idle(timeout_s)

    def _cancel_jobs(self, timeout_s: float = 20.0) -> None:
        """Cancel this cluster's jobs and give their steps a moment to end, so no task outlives the cluster."""
        listing = self.run(["squeue", "-h", "-o", "%A"], check=False, timeout_s=120)
        job_ids = listing.stdout.split() if listing.returncode == 0 else []
        if not job_ids:
            return
        self.run(["scancel", *job_ids], check=False, timeout_s=120)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self._step_daemons():
            time.sleep(0.2)

    def _step_daemons(self) -> list[int]:
        """Pids of this cluster's slurmstepd processes (recognised by the SLURM_CONF they inherited)."""
        marker = f"SLURM_CONF={self.conf_path}\0".encode()
        pids = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                if (proc / "comm").read_text().strip() == "slurmstepd" and marker in (proc / "environ").read_bytes():
                    pids.append(int(proc.name))
            except OSError:
                continue
        return pids

    def _kill_leftover_steps(self) -> None:
        """Steps (and every task under them) that survived the daemons: SIGKILL the whole tree."""
        roots = set(self._step_daemons())
        if not roots:
            return
        children: dict[int, list[int]] = {}
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                ppid = int((proc / "stat").read_text().rsplit(")", 1)[-1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(proc.name))
        tree, stack = [], list(roots)
        while stack:
            pid = stack.pop()
            tree.append(pid)
            stack.extend(children.get(pid, []))
        for pid in tree:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    @staticmethod
    def _stop(pid: int, command: str, timeout_s: float) -> None:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not _pid_alive(pid, command):
                return
            time.sleep(0.1)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return

    def _start(self, argv: list[str], name: str) -> None:
        start_log = self.log_dir / f"{name}.start.log"
        with start_log.open("w") as out:
            result = subprocess.run(argv, env=self.env(), stdin=subprocess.DEVNULL, stdout=out, stderr=out, check=False)
        if result.returncode != 0:
            tail = start_log.read_text().strip().splitlines()[-1:] or ["no output"]
            raise LocalSlurmError(f"{name} did not start (exit {result.returncode}): {tail[0]}; see {self.log_dir}")

    def _start_munged(self) -> None:
        munge_dir = self.state_dir / "munge"
        self._start(
            [
                "munged",
                f"--key-file={munge_dir / 'munge.key'}",
                f"--socket={self.munge_socket}",
                f"--pid-file={self.run_dir / 'munged.pid'}",
                f"--log-file={self.log_dir / 'munged.log'}",
                f"--seed-file={munge_dir / 'munged.seed'}",
            ],
            "munged",
        )
        check = subprocess.run(
            f"munge -n -S {self.munge_socket} | unmunge -S {self.munge_socket}",
            shell=True,
            capture_output=True,
            text=True,
            check=False,
        )
        if check.returncode != 0:
            raise LocalSlurmError(f"munge round trip failed: {check.stderr.strip() or check.stdout.strip()}")

    def _start_database(self, timeout_s: float) -> None:
        """Our own mariadbd (datadir, socket, port under the state dir) and slurmdbd's user in it."""
        data = self.mysql_dir / "data"
        if not (data / "mysql").is_dir():
            shutil.rmtree(data, ignore_errors=True)
            data.mkdir(parents=True)
            install = [
                "mariadb-install-db",
                "--no-defaults",
                f"--datadir={data}",
                "--user=root",
                "--auth-root-authentication-method=socket",
                "--skip-test-db",
            ]
            log = self.log_dir / "mariadb-install.log"
            with log.open("w") as out:
                result = subprocess.run(install, stdout=out, stderr=out, stdin=subprocess.DEVNULL, check=False)
            if result.returncode != 0:
                raise LocalSlurmError(f"mariadb-install-db failed ({result.returncode}); see {log}")
        ports = self._ports()
        # mariadbd stays in the foreground: start it in its own session so it outlives this process like the
        # SLURM daemons do; it writes its own pid file.
        start_log = (self.log_dir / "mariadbd.start.log").open("w")
        with start_log:
            subprocess.Popen(
                [
                    "mariadbd",
                    "--no-defaults",
                    f"--datadir={data}",
                    f"--socket={self.mysql_socket}",
                    f"--port={ports['mysql']}",
                    "--bind-address=127.0.0.1",
                    f"--pid-file={self.run_dir / 'mariadbd.pid'}",
                    f"--log-error={self.log_dir / 'mariadbd.log'}",
                    "--user=root",
                    "--skip-name-resolve",
                    "--innodb-buffer-pool-size=64M",
                    # slurmdbd's advice (it warns below these): a large log file and a long lock wait.
                    "--innodb-log-file-size=64M",
                    "--innodb-lock-wait-timeout=900",
                ],
                stdin=subprocess.DEVNULL,
                stdout=start_log,
                stderr=start_log,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout_s
        password = self._database_password()
        sql = (
            f"CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '{password}'; "
            f"ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '{password}'; "
            "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
        )
        while True:
            answer = subprocess.run(
                ["mariadb", "--no-defaults", f"--socket={self.mysql_socket}", "-u", "root", "-e", sql],
                capture_output=True,
                text=True,
                check=False,
            )
            if answer.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise LocalSlurmError(
                    f"mariadbd not answering after {timeout_s:.0f} s: {answer.stderr.strip()}; see {self.log_dir}"
                )
            time.sleep(0.3)

    def _database_password(self) -> str:
        secret = self.mysql_dir / "password"
        if not secret.exists():
            secret.write_text(hashlib.sha256(os.urandom(32)).hexdigest()[:32])
            secret.chmod(0o600)
        return secret.read_text().strip()

    def _wait_for_slurmdbd(self, timeout_s: float) -> None:
        """slurmdbd answers and knows this cluster (slurmctld registers with it at start)."""
        deadline = time.monotonic() + timeout_s
        while True:
            result = self.run(["sacctmgr", "-n", "-P", "show", "cluster", "format=cluster"], check=False, timeout_s=120)
            if result.returncode == 0:
                if "local" not in result.stdout.split():
                    self.run(["sacctmgr", "-i", "add", "cluster", "local"])
                return
            if time.monotonic() > deadline:
                raise LocalSlurmError(f"slurmdbd not answering after {timeout_s:.0f} s; see {self.log_dir}")
            time.sleep(0.3)

    # ----- files -----
    def _prepare(self) -> None:
        for directory, mode in (
            (self.state_dir, 0o755),
            (self.run_dir, 0o755),
            (self.munge_socket.parent.parent, 0o755),
            (self.munge_socket.parent, 0o755),
            (self.log_dir, 0o755),
            (self.state_dir / "munge", 0o700),
            (self.spool_dir, 0o755),
            (self.spool_dir / "slurmctld", 0o755),
            (self.state_dir / "health", 0o755),
            *(((self.mysql_dir, 0o700),) if self.accounting else ()),
            (self.fsx_dir, 0o755),
            (self.drain_requests_dir.parent, 0o755),
            (self.drain_requests_dir, 0o1733),
            *((self.spool_dir / node, 0o755) for node in self.nodes),
            *((self.scratch_dir(node), 0o755) for node in self.nodes),
        ):
            directory.mkdir(parents=True, exist_ok=True)
            directory.chmod(mode)
        key = self.state_dir / "munge" / "munge.key"
        if not key.exists():
            key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self._write_config()
        if self.accounting:
            self._write_slurmdbd_config()
        self._write_health()
        self._write_env_script()

    def _ports(self) -> dict[str, int]:
        """Ports kept from the last start when still free, so a restarted cluster keeps its address."""
        state_file = self.state_dir / "ports.json"
        wanted = ["slurmctld", *self.nodes, *(("slurmdbd", "mysql") if self.accounting else ())]
        try:
            ports = json.loads(state_file.read_text())
            if sorted(ports) == sorted(wanted) and all(_port_free(port) for port in ports.values()):
                return {name: int(port) for name, port in ports.items()}
        except (OSError, ValueError):
            pass
        ports = dict(zip(wanted, _free_ports(len(wanted)), strict=True))
        state_file.write_text(json.dumps(ports, indent=1) + "\n")
        return ports

    def _write_config(self) -> None:
        ports = self._ports()
        hostname = socket.gethostname()
        memory_mib = _node_memory_mib(len(self.nodes))
        node_lines = "\n".join(
            f"NodeName={node} NodeHostname={hostname} NodeAddr=127.0.0.1 Port={ports[node]} "
            f"CPUs={self.cpus_per_node} RealMemory={memory_mib} State=UNKNOWN"
            + (f" Gres=gpu:{self.gpus_per_node}" if self.gpus_per_node else "")
            for node in self.nodes
        )
        self._write_gres_config()
        text = string.Template(TEMPLATE.read_text()).substitute(
            node_count=len(self.nodes),
            cluster_name="local",
            hostname=hostname,
            slurmctld_port=ports["slurmctld"],
            munge_socket=self.munge_socket,
            state_dir=self.state_dir,
            spool_dir=self.spool_dir,
            node_lines=node_lines,
            partition=self.partition,
            node_list=",".join(self.nodes),
            accounting=self._accounting_lines(ports),
            gres_types="GresTypes=gpu" if self.gpus_per_node else "# no GRES: CPU nodes",
        )
        self.conf_path.write_text(text)

    def _write_gres_config(self) -> None:
        """gres.conf (beside slurm.conf, where slurmd and slurmctld look) declaring each node's GPUs.

        Slurm 22.05's slurmd drops a GPU without File= ("Removing file-less GPU", also with AutoDetect=off or
        Flags=CountOnly) and refuses a File= that is no character device; so each GPU is a link to /dev/null under
        the state directory. With TaskPlugin=task/none nothing constrains or opens them."""
        path = self.state_dir / "gres.conf"
        if not self.gpus_per_node:
            path.unlink(missing_ok=True)
            return
        lines = ["# Rendered by cluster.verify.local_slurm: stand-in GPUs (links to /dev/null), counted by Slurm."]
        lines.append("AutoDetect=off")
        for node in self.nodes:
            devices = self.state_dir / "gpus" / node
            devices.mkdir(parents=True, exist_ok=True)
            for index in range(self.gpus_per_node):
                link = devices / f"gpu{index}"
                link.unlink(missing_ok=True)
                link.symlink_to("/dev/null")
            lines.append(f"NodeName={node} Name=gpu File={devices}/gpu[0-{self.gpus_per_node - 1}]")
        path.write_text("\n".join(lines) + "\n")

    def _accounting_lines(self, ports: dict[str, int]) -> str:
        if not self.accounting:
            return "JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none"
        # The spec's settings (what ParallelCluster gets as CustomSlurmSettings), after the storage lines
        # ParallelCluster itself writes when SlurmSettings.Database is set.
        lines = [
            "JobAcctGatherType=jobacct_gather/linux",
            "JobAcctGatherFrequency=30",
            "AccountingStorageType=accounting_storage/slurmdbd",
            "AccountingStorageHost=127.0.0.1",
            f"AccountingStoragePort={ports['slurmdbd']}",
            # The munge socket for connections to slurmdbd (AuthInfo covers only slurmctld and slurmd).
            f"AccountingStoragePass={self.munge_socket}",
            *(f"{key}={value}" for key, value in slurm_conf_settings(self.accounting)),
        ]
        return "\n".join(lines)

    def _write_slurmdbd_config(self) -> None:
        # slurmdbd finds slurmdbd.conf beside $SLURM_CONF; it refuses one readable by others.
        ports = self._ports()
        path = self.state_dir / "slurmdbd.conf"
        path.write_text(
            "# Rendered by cluster.verify.local_slurm: slurmdbd on this cluster's own MariaDB server.\n"
            "AuthType=auth/munge\n"
            f"AuthInfo=socket={self.munge_socket}\n"
            "DbdHost=localhost\n"
            "DbdAddr=127.0.0.1\n"
            f"DbdPort={ports['slurmdbd']}\n"
            "SlurmUser=root\n"
            f"PidFile={self.run_dir / 'slurmdbd.pid'}\n"
            f"LogFile={self.log_dir / 'slurmdbd.log'}\n"
            "StorageType=accounting_storage/mysql\n"
            "StorageHost=127.0.0.1\n"
            f"StoragePort={ports['mysql']}\n"
            "StorageUser=slurm\n"
            f"StoragePass={self._database_password()}\n"
            "StorageLoc=slurm_acct_db\n"
        )
        path.chmod(0o600)

    def _write_health(self) -> None:
        # The local nodes are CPU nodes: no accelerators and no EFA to count; the free-space checks are real.
        for node in self.nodes:
            settings = HealthSettings(
                expected_gpus=0,
                expected_neuron=0,
                expected_efa=0,
                fsx_path=str(self.fsx_dir),
                min_fsx_free_gib=1,
                scratch_path=str(self.scratch_dir(node)),
                min_scratch_free_gib=1,
                kill_stray=False,  # jobs run as root here: never kill by uid
            )
            path = self.health_config(node)
            if not path.exists():
                path.write_text(settings.render(f"health-check settings for local node {node}"))
        for stage in ("prolog", "epilog"):
            wrapper = self.state_dir / f"{stage}.sh"
            wrapper.write_text(
                "#!/bin/bash\n"
                f"# Rendered by cluster.verify.local_slurm: this node's health settings, then the repo's {stage}.\n"
                f'export HEALTH_CONFIG="{self.state_dir}/health/$SLURMD_NODENAME.env"\n'
                f'export SLURM_CONF="{self.conf_path}"\n'
                f'exec "{HEALTH_DIR / f"{stage}.sh"}"\n'
            )
            wrapper.chmod(0o755)

    def _write_env_script(self) -> None:
        (self.state_dir / "env.sh").write_text(
            f"# source this file to point sbatch, squeue, scontrol and sinfo at the local cluster\n"
            f'export SLURM_CONF="{self.conf_path}"\n'
            f'export LLM_DRAIN_REQUESTS="{self.drain_requests_dir}"\n'
        )

    def reset_health(self, node: str) -> None:
        """Rewrite a node's health settings to the passing defaults (tests break them on purpose)."""
        self.health_config(node).unlink(missing_ok=True)
        self._write_health()

    # ----- queries -----
    def run(
        self, argv: Iterable[str], check: bool = True, timeout_s: float = 120.0
    ) -> subprocess.CompletedProcess[str]:
        """Run a SLURM client command against this cluster."""
        argv = list(argv)
        result = subprocess.run(argv, env=self.env(), capture_output=True, text=True, timeout=timeout_s, check=False)
        if check and result.returncode != 0:
            message = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:] or ["no output"]
            raise LocalSlurmError(f"{' '.join(argv)} failed ({result.returncode}): {message[0]}")
        return result

    def job(self, job_id: str) -> dict[str, str]:
        """`scontrol show job` as a dict (JobState, NodeList, Restarts, ExitCode, ...); {} once SLURM forgot it."""
        result = self.run(["scontrol", "show", "job", "-o", job_id], check=False, timeout_s=120)
        if result.returncode != 0:
            return {}
        return dict(_FIELD_RE.findall(result.stdout.strip()))

    def node_states(self) -> list[NodeState]:
        result = self.run(["sinfo", "-N", "-h", "-o", "%N|%T|%E"], check=False, timeout_s=120)
        if result.returncode != 0:
            return []
        states = []
        for line in result.stdout.splitlines():
            name, state, reason = [*line.split("|", 2), "", ""][:3]
            state = state.strip().lower()
            states.append(NodeState(name.strip(), state.rstrip("*~#!%$@^-"), reason.strip(), "*" not in state))
        return states

    def _wait(self, ready: frozenset[str], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        states: list[NodeState] = []
        while time.monotonic() < deadline:
            states = self.node_states()
            if {s.name for s in states} >= set(self.nodes) and all(s.state in ready and s.responding for s in states):
                return
            time.sleep(0.3)
        seen = (
            ", ".join(f"{s.name}={s.state}{'' if s.responding else '*'}" for s in states) or "no answer from slurmctld"
        )
        raise LocalSlurmError(f"nodes not {what} after {timeout_s:.0f} s ({seen}); logs in {self.log_dir}")

    def wait_idle(self, timeout_s: float = 300.0) -> None:
        self._wait(frozenset({"idle"}), timeout_s, "idle")

    def wait_responding(self, timeout_s: float = 300.0) -> None:
        self._wait(RESPONDING_STATES, timeout_s, "responding")

    def resume_all(self) -> None:
        """Undrain every node (after a test drained one on purpose)."""
        states = self.node_states()
        for state in states:
            if state.state in {"drained", "draining", "down"}:
                self.run(["scontrol", "update", f"nodename={state.name}", "state=resume"])
        if not all(state.responding for state in states):
            # A failed batch launch (prolog error) leaves the node flagged as not responding until the next
            # ping, up to SlurmdTimeout/3 away; a reconfigure makes every slurmd register again now.
            self.run(["scontrol", "reconfigure"])

    def status(self) -> dict[str, object]:
        running = self.running_daemons()
        return {
            "state_dir": str(self.state_dir),
            "slurm_conf": str(self.conf_path),
            "daemons": running,
            "up": len(running) == len(self._pid_files()),
            "nodes": [dataclasses.asdict(state) for state in self.node_states()] if running.get("slurmctld") else [],
        }


def _node_memory_mib(node_count: int) -> int:
    """A share of the host's memory per node (SLURM only uses it for --mem requests here)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                total_mib = int(line.split()[1]) // 1024
                return max(512, total_mib // (node_count + 1))
    except (OSError, ValueError):
        pass
    return 2048
