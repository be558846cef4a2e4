"""A local slurmctld configured as ParallelCluster configures a spec's head node, to check jobs against it.

Only munged and slurmctld run: no slurmd, so no job ever starts, but `sbatch --test-only` answers as the real
controller would whether a script's partition, node count, GRES and options fit the cluster. The partitions,
node ranges (State=CLOUD, powered down, as ParallelCluster leaves them), features and GRES come from
`cluster.slurm_names`; the scheduler settings from cluster/slurm_naming.json; the CustomSlurmSettings
from the spec's ClusterConfiguration. The files are laid out as ParallelCluster lays them out: slurm.conf
includes slurm_parallelcluster.conf, which includes one partition file per queue; gres.conf likewise.

What differs from the head node, and why:
- node-side plugins (ProctrackType, TaskPlugin): this host's, since no slurmd runs;
- SuspendProgram/ResumeProgram: /bin/true (ParallelCluster's launch EC2 instances);
- accounting: none (no slurmdbd), so the spec's Accounting* CustomSlurmSettings are left out.
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cluster.config_builder import build_cluster_config, example_refs
from cluster.slurm_names import Partition, fact, partitions, suspend_exc_nodes
from cluster.verify.local_slurm.harness import LocalSlurm, LocalSlurmError
from cluster.verify.local_slurm.install import ensure_slurm
from spec.model import DeploymentSpec

# Settings a head node without slurmdbd cannot honour.
_NEEDS_ACCOUNTING = ("Accounting",)


def custom_settings(config: dict[str, Any]) -> list[tuple[str, str]]:
    """The ClusterConfiguration's SlurmSettings.CustomSlurmSettings as (key, value), accounting ones left out."""
    settings = config["Scheduling"]["SlurmSettings"].get("CustomSlurmSettings", [])
    pairs = [(str(key), str(value)) for item in settings for key, value in item.items()]
    return [(key, value) for key, value in pairs if not key.startswith(_NEEDS_ACCOUNTING)]


class PclusterShapedSlurm(LocalSlurm):
    """A controller-only local cluster named and configured the ParallelCluster way."""

    def __init__(
        self,
        state_dir: Path | str,
        parts: Sequence[Partition],
        settings: Sequence[tuple[str, str]] = (),
        suspend_time_s: int = 600,
        resume_timeout_s: int = 1800,
        cluster_name: str = "pcluster",
    ) -> None:
        names = [name for partition in parts for name in partition.node_names()]
        super().__init__(state_dir, nodes=names)
        self.partitions = tuple(parts)
        self.settings = tuple(settings)
        self.suspend_time_s = suspend_time_s
        self.resume_timeout_s = resume_timeout_s
        self.cluster_name = cluster_name

    @classmethod
    def for_spec(cls, state_dir: Path | str, spec: DeploymentSpec) -> PclusterShapedSlurm:
        config = build_cluster_config(spec, example_refs(spec))
        slurm_settings = config["Scheduling"]["SlurmSettings"]
        return cls(
            state_dir,
            partitions(config),
            custom_settings(config),
            suspend_time_s=int(slurm_settings["ScaledownIdletime"]) * 60,
            resume_timeout_s=int(config["DevSettings"]["Timeouts"]["ComputeNodeBootstrapTimeout"]),
            cluster_name=spec.name,
        )

    def _pid_files(self) -> list[tuple[str, Path]]:
        return [("slurmctld", self.run_dir / "slurmctld.pid"), ("munged", self.run_dir / "munged.pid")]

    def up(self, timeout_s: float = 300.0) -> None:
        """Start munged and slurmctld (a running pair is restarted: the config may have changed)."""
        ensure_slurm()
        self.down()
        self._prepare()
        self._start_munged()
        self._start(["slurmctld", "-f", str(self.conf_path)], "slurmctld")
        deadline = time.monotonic() + timeout_s
        while self.run(["scontrol", "ping"], check=False, timeout_s=120).returncode != 0:
            if time.monotonic() > deadline:
                raise LocalSlurmError(f"slurmctld not answering after {timeout_s:.0f} s; see {self.log_dir}")
            time.sleep(0.3)

    def test_only(self, script: Path, *options: str) -> subprocess.CompletedProcess[str]:
        """`sbatch --test-only [options] script`: exit 0 and 'to start at' when the controller would take it."""
        return self.run(["sbatch", "--test-only", *options, str(script)], check=False)

    # ----- files -----
    def _write_health(self) -> None:
        """No slurmd, so no prolog or epilog to configure."""

    def _write_config(self) -> None:
        include_dir = self.state_dir / "pcluster"
        include_dir.mkdir(parents=True, exist_ok=True)
        for partition in self.partitions:
            (include_dir / f"slurm_parallelcluster_{partition.name}_partition.conf").write_text(
                "".join(f"{line}\n" for line in partition.lines())
            )
            (include_dir / f"slurm_parallelcluster_{partition.name}_gres.conf").write_text(
                "".join(f"{line}\n" for line in partition.gres_lines())
            )
        excluded = suspend_exc_nodes(self.partitions)
        (self.state_dir / "slurm_parallelcluster.conf").write_text(
            f"SuspendTime={self.suspend_time_s}\nResumeTimeout={self.resume_timeout_s}\n"
            + "".join(
                f"include {include_dir}/slurm_parallelcluster_{partition.name}_partition.conf\n"
                for partition in self.partitions
            )
            + (f"SuspendExcNodes={excluded}\n" if excluded else "")
        )
        (self.state_dir / "gres.conf").write_text(
            "".join(
                f"include {include_dir}/slurm_parallelcluster_{partition.name}_gres.conf\n"
                for partition in self.partitions
            )
        )
        self.conf_path.write_text(self._main_conf())

    def _main_conf(self) -> str:
        scheduler: dict[str, str] = dict(fact("scheduler_settings")["settings"])
        scheduler.update(self.settings)  # CustomSlurmSettings come after ParallelCluster's own lines
        lines = [
            "# Rendered by cluster.verify.local_slurm.pcluster_shaped: ParallelCluster's head-node settings and names,",
            "# controller only (no slurmd): for `sbatch --test-only`.",
            f"ClusterName={self.cluster_name}",
            f"SlurmctldHost={socket.gethostname()}(127.0.0.1)",
            f"SlurmctldPort={self._ports()['slurmctld']}",
            "SlurmUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.munge_socket}",
            f"StateSaveLocation={self.spool_dir}/slurmctld",
            f"SlurmdSpoolDir={self.spool_dir}/%n",
            f"SlurmctldPidFile={self.run_dir}/slurmctld.pid",
            f"SlurmdPidFile={self.run_dir}/slurmd-%n.pid",
            f"SlurmctldLogFile={self.log_dir}/slurmctld.log",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "SuspendProgram=/bin/true",
            "ResumeProgram=/bin/true",
            "ResumeFailProgram=/bin/true",
            *(f"{key}={value}" for key, value in scheduler.items()),
            f"include {self.state_dir / 'slurm_parallelcluster.conf'}",
        ]
        return "\n".join(lines) + "\n"
