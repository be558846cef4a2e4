"""Jobs of a user without Slurm operator rights on the local cluster, as on ParallelCluster, where no user is root.

The user is `nobody` (on every Debian host). The repo's venv runs on an interpreter that may live under root's home
(pyenv: /root is mode 700), and the venv itself may too (the environment cache, ~/.cache/llm-training-on-aws, that
the clone's .venv links to), out of that user's reach; so the cluster's daemons run in a private mount namespace of
their own (`unshare --mount`) where /root is an empty tmpfs holding only what jobs run: the interpreter's tree, the
venv's real folder and the repo. Jobs inherit the namespace from slurmd; nothing outside it changes. The test's own processes stay where they are: they reach the
daemons over TCP and the jobs' files through paths outside /root.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from cluster.verify.local_slurm import LocalSlurm

REPO = Path(__file__).resolve().parents[2]
JOB_USER = "nobody"
JOB_UID = 65534

# Hides root's home but for the folders given, each bound back at the same path (mount --move keeps a bind mounted
# across the tmpfs mount that hides its source). Then waits, holding the namespace, until killed.
NAMESPACE_SCRIPT = """set -euo pipefail
kept=() stages=()
for path in "$@"; do
	[[ "$path" == /root/* ]] || continue
	stage="$(mktemp -d /run/local-slurm-kept.XXXXXX)"
	mount --bind "$path" "$stage"
	kept+=("$path") stages+=("$stage")
done
if ((${#kept[@]})); then
	mount -t tmpfs -o mode=0755 tmpfs /root
	for i in "${!kept[@]}"; do
		mkdir -p "${kept[$i]}"
		mount --move "${stages[$i]}" "${kept[$i]}"
		rmdir "${stages[$i]}"
	done
fi
echo ready
exec sleep infinity
"""


def kept_folders() -> list[str]:
    """What a job runs from: the interpreter's tree, the venv's real folder (a cache entry) and the repo."""
    return [sys.base_prefix, str((REPO / ".venv").resolve()), str(REPO)]


class UserReachableSlurm(LocalSlurm):
    """A LocalSlurm whose daemons (and so its jobs) run in a mount namespace where the job user can run the venv."""

    holder: subprocess.Popen[str] | None = None  # the process that holds the namespace open

    def enter(self) -> list[str]:
        """The command prefix that runs a command in the daemons' namespace."""
        if self.holder is None or self.holder.poll() is not None:
            self.holder = subprocess.Popen(
                ["unshare", "--mount", "--propagation", "private", "bash", "-c", NAMESPACE_SCRIPT, "namespace",
                 *kept_folders()],
                stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
            )  # fmt: skip
            assert self.holder.stdout is not None
            ready = self.holder.stdout.readline().strip()
            if ready != "ready":
                raise RuntimeError(f"the mount namespace for the local cluster did not start: {ready!r}")
        return ["nsenter", f"--target={self.holder.pid}", "--mount", "--"]

    def _start(self, argv: list[str], name: str) -> None:
        super()._start([*self.enter(), *argv], name)

    def down(self, timeout_s: float = 20.0) -> None:
        super().down(timeout_s)
        if self.holder is not None:
            self.holder.kill()
            self.holder.wait()
            self.holder = None


def shared_work_dir(prefix: str) -> Path:
    """A folder the job user can reach (pytest's own tmp folders are root's, mode 700)."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    work.chmod(0o755)
    return work


def owned_by_job_user(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    os.chown(path, JOB_UID, JOB_UID)
    return path


def submit_as_job_user(cluster: UserReachableSlurm, argv: list[str], home: Path) -> list[str]:
    """`python -m launch.submit ARGV` as the job user, in the daemons' namespace; the job ids it printed."""
    env = {
        "HOME": str(owned_by_job_user(home)),
        "USER": JOB_USER,
        "LOGNAME": JOB_USER,
        "PATH": os.environ["PATH"],
        "LANG": "C.UTF-8",
        "SLURM_CONF": str(cluster.conf_path),
        "LLM_DRAIN_REQUESTS": cluster.env()["LLM_DRAIN_REQUESTS"],
    }
    # Entering a mount namespace moves to its root: --wd brings the command back to the repo.
    command = [
        *cluster.enter()[:-1],
        f"--wd={REPO}",
        "--",
        "setpriv",
        f"--reuid={JOB_UID}",
        f"--regid={JOB_UID}",
        "--clear-groups",
    ]
    command += [str(REPO / ".venv" / "bin" / "python"), "-m", "launch.submit", *argv]
    result = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    return [line.split()[0] for line in result.stdout.splitlines() if line.strip()]
