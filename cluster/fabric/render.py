"""The fabric check's sbatch script for a queue: nccl-tests on GPU queues, nccom-test on Trainium queues.

Directives and a settings block (shell-quoted, as the training jobs render theirs), then lib.sh and the tool's body
from this directory. The rendered script is self-contained: editing the repository does not change a queued job
(only the final `python -m cluster.fabric check` runs from the repository).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cluster.fabric.parsers import NCCL_TESTS, NCCOM_TEST
from slurm import netenv
from slurm.render import SettingValue, sbatch_directives, settings_block
from slurm.target import Target

PARTS_DIR = Path(__file__).resolve().parent
SRUN_MPI_PLUGINS: tuple[str, ...] = ("pmix", "pmi2")

# The notes' nccl-tests run: 8 B to 16 GiB, doubling, one GPU per process (one process per GPU).
NCCL_TESTS_ARGS: tuple[str, ...] = ("-b", "8", "-e", "16G", "-f", "2", "-g", "1")
# nccl-tests tuning for EFA: smaller NCCL buffers and network chunks than NCCL's defaults.
NCCL_TESTS_ENV: dict[str, str] = {"NCCL_BUFFSIZE": "8388608", "NCCL_P2P_NET_CHUNKSIZE": "524288"}
# With NCCL_DEBUG=INFO, only what the check reads: the chosen network (INIT) and libfabric provider (NET).
NCCL_DEBUG_SUBSYS = "INIT,NET"

# nccom-test: 8 B to 4 GiB, doubling, fp32 so that --check can validate the sums.
NCCOM_ITERS = 20
NCCOM_ARGS: tuple[str, ...] = (
    "-b", "8", "-e", "4GB", "-f", "2", "-n", str(NCCOM_ITERS), "-w", "5", "-d", "fp32", "--check", "--non-interactive",
)  # fmt: skip


@dataclass(frozen=True)
class FabricJob:
    """What the script is rendered from; the CLI fills it from the spec and its arguments."""

    target: Target
    nodes: int
    result_root: Path
    python: str
    workdir: Path
    command_line: str
    time: str | None = None
    min_fraction: float | None = None
    srun_mpi: str = "pmix"
    nccl_debug: str = "INFO"
    libfabric: str = netenv.DEFAULT_LIBFABRIC
    aws_ofi_nccl: str = netenv.DEFAULT_AWS_OFI_NCCL

    @property
    def tool(self) -> str:
        return NCCL_TESTS if self.target.instance.accelerator == "gpu" else NCCOM_TEST

    @property
    def job_name(self) -> str:
        short = "nccl" if self.tool == NCCL_TESTS else "nccom"
        return f"fabric-{short}-{self.target.queue}"

    @property
    def script_path(self) -> Path:
        return self.result_root / f"{self.job_name}.sbatch"

    @property
    def log_dir(self) -> Path:
        return self.result_root / "logs"


def part(name: str) -> str:
    text = (PARTS_DIR / name).read_text(encoding="utf-8")
    body = [line for line in text.splitlines() if not line.startswith(("#!", "# shellcheck shell="))]
    return "\n".join(body).strip("\n") + "\n"


def _directives(job: FabricJob) -> list[tuple[str, str | None]]:
    directives: list[tuple[str, str | None]] = [
        ("job-name", job.job_name),
        ("partition", job.target.partition),
        ("nodes", str(job.nodes)),
        # Whole nodes, every GPU requested: every accelerator and EFA interface, no other job's traffic.
        *job.target.whole_node_directives(),
    ]
    if job.time:
        directives.append(("time", job.time))
    directives += [("output", str(job.log_dir / "%x-%j.out")), ("open-mode", "append"), ("no-requeue", None)]
    return directives


def _settings_and_env(job: FabricJob) -> tuple[dict[str, SettingValue], dict[str, str], str]:
    target = job.target
    settings: dict[str, SettingValue] = {
        "CHECK_TOOL": job.tool,
        "INSTANCE_TYPE": target.instance.name,
        "RESULT_ROOT": str(job.result_root),
        "PYTHON": job.python,
        "WORKDIR": str(job.workdir),
        "MIN_FRACTION": "" if job.min_fraction is None else str(job.min_fraction),
    }
    env = dict(netenv.common_env())
    if job.tool == NCCL_TESTS:
        settings |= {"GPUS_PER_NODE": target.workers_per_node, "SRUN_MPI": job.srun_mpi, "TEST_ARGS": NCCL_TESTS_ARGS}
        env |= netenv.gpu_env(target, job.libfabric, job.aws_ofi_nccl, job.nccl_debug)
        env |= NCCL_TESTS_ENV
        if job.nccl_debug == "INFO":
            env["NCCL_DEBUG_SUBSYS"] = NCCL_DEBUG_SUBSYS
        return settings, env, "nccl_allreduce.sh"
    settings |= {"WORKERS_PER_NODE": target.workers_per_node, "NCCOM_ARGS": NCCOM_ARGS, "NCCOM_ITERS": NCCOM_ITERS}
    env |= netenv.neuron_env(target)
    return settings, env, "neuron_allreduce.sh"


def render_script(job: FabricJob) -> str:
    settings, env, body = _settings_and_env(job)
    sections: Sequence[str] = [
        # lib.sh functions one tool leaves unused, and the sampler that nodes run through `declare -f`: not dead.
        "#!/bin/bash\n# shellcheck disable=SC2317\n" + sbatch_directives(_directives(job)),
        "# Rendered by: " + job.command_line.replace("\n", " ") + "\n"
        "# Edit the options and render again rather than editing this file.\n",
        "# ---- settings ----\n" + settings_block(settings, env),
        "# ---- cluster/fabric/lib.sh ----\n" + part("lib.sh"),
        f"# ---- cluster/fabric/{body} ----\n" + part(body),
    ]
    return "\n".join(sections)
