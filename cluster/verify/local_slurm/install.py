"""Install Debian's slurm-wlm, munge and shellcheck with apt-get when they are missing."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

SLURM_PACKAGES: tuple[str, ...] = ("slurmctld", "slurmd", "slurm-client", "munge")
SLURM_BINARIES: tuple[str, ...] = ("slurmctld", "slurmd", "sbatch", "srun", "scontrol", "sinfo", "munged", "munge")
# slurmdbd and its database for the accounting tests: Debian bookworm's, the same Slurm release as above.
ACCOUNTING_PACKAGES: tuple[str, ...] = ("slurmdbd", "mariadb-server", "mariadb-client")
ACCOUNTING_BINARIES: tuple[str, ...] = ("slurmdbd", "sacct", "sacctmgr", "sshare", "mariadbd", "mariadb-install-db")
# The releases the tests were written against: Slurm 22.05's sacct fields and MariaDB 10.11's bootstrap options.
PINNED_VERSIONS: dict[str, str] = {"slurmdbd": "22.05.", "mariadb-server": "1:10.11."}
# Host-wide, so parallel test workers (pytest-xdist) and checkouts install one at a time: `apt-get update` does not
# wait for apt's lists lock as DPkg::Lock::Timeout makes `install` wait for dpkg's; it fails at once.
INSTALL_LOCK = Path("/run/lock/llm-training-on-aws-apt.lock")


class InstallError(RuntimeError):
    """A package could not be installed; the message says which and why in one line."""


def missing_binaries(binaries: tuple[str, ...] = SLURM_BINARIES) -> list[str]:
    return [name for name in binaries if shutil.which(name) is None]


def apt_install(packages: tuple[str, ...], unless_present: tuple[str, ...] = ()) -> None:
    """apt-get update + install, non-interactive, one installer of ours at a time (INSTALL_LOCK); waits for a dpkg
    lock held by another install. Nothing is installed when every binary of `unless_present` is there once the lock
    is ours (a parallel worker installed them meanwhile)."""
    if os.geteuid() != 0:
        raise InstallError(f"installing {' '.join(packages)} needs root (run as root or install them yourself)")
    if shutil.which("apt-get") is None:
        raise InstallError(f"no apt-get on this host: install {' '.join(packages)} with its package manager")
    INSTALL_LOCK.parent.mkdir(parents=True, exist_ok=True)
    with INSTALL_LOCK.open("a") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)  # released when the file closes, also if this process dies
        if unless_present and not missing_binaries(unless_present):
            return
        _apt_get(packages)


def _apt_get(packages: tuple[str, ...]) -> None:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    lock = ["-o", "DPkg::Lock::Timeout=300"]
    for command in (
        ["apt-get", *lock, "update", "-q"],
        ["apt-get", *lock, "install", "-y", "-q", "--no-install-recommends", *packages],
    ):
        result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            last = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:] or ["no output"]
            raise InstallError(f"{' '.join(command[:3])} ... failed ({result.returncode}): {last[0]}")


def ensure_slurm() -> None:
    if missing_binaries():
        apt_install(SLURM_PACKAGES, unless_present=SLURM_BINARIES)
    still_missing = missing_binaries()
    if still_missing:
        raise InstallError(f"still missing after install: {', '.join(still_missing)}")


def installed_version(package: str) -> str | None:
    result = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Version}", package], capture_output=True, text=True, check=False
    )
    return result.stdout.strip() if result.returncode == 0 and result.stdout.strip() else None


def ensure_accounting() -> None:
    """slurmdbd and MariaDB, from the same Debian release as the Slurm packages; refuses another series."""
    if missing_binaries(ACCOUNTING_BINARIES):
        apt_install(ACCOUNTING_PACKAGES, unless_present=ACCOUNTING_BINARIES)
    still_missing = missing_binaries(ACCOUNTING_BINARIES)
    if still_missing:
        raise InstallError(f"still missing after install: {', '.join(still_missing)}")
    for package, prefix in PINNED_VERSIONS.items():
        version = installed_version(package)
        if version is not None and not version.startswith(prefix):
            raise InstallError(f"{package} {version} is installed; the accounting tests need {prefix}x")


def ensure_shellcheck() -> str:
    """Path of shellcheck, installing Debian's package when needed."""
    if shutil.which("shellcheck") is None:
        apt_install(("shellcheck",), unless_present=("shellcheck",))
    path = shutil.which("shellcheck")
    if path is None:
        raise InstallError("shellcheck still missing after install")
    return path
