"""Install Debian's slurm-wlm, munge and shellcheck with apt-get when they are missing."""

from __future__ import annotations

import os
import shutil
import subprocess

SLURM_PACKAGES: tuple[str, ...] = ("slurmctld", "slurmd", "slurm-client", "munge")
SLURM_BINARIES: tuple[str, ...] = ("slurmctld", "slurmd", "sbatch", "srun", "scontrol", "sinfo", "munged", "munge")
# slurmdbd and its database for the accounting tests: Debian bookworm's, the same Slurm release as above.
ACCOUNTING_PACKAGES: tuple[str, ...] = ("slurmdbd", "mariadb-server", "mariadb-client")
ACCOUNTING_BINARIES: tuple[str, ...] = ("slurmdbd", "sacct", "sacctmgr", "sshare", "mariadbd", "mariadb-install-db")
# The releases the tests were written against: Slurm 22.05's sacct fields and MariaDB 10.11's bootstrap options.
PINNED_VERSIONS: dict[str, str] = {"slurmdbd": "22.05.", "mariadb-server": "1:10.11."}


class InstallError(RuntimeError):
    """A package could not be installed; the message says which and why in one line."""


def missing_binaries(binaries: tuple[str, ...] = SLURM_BINARIES) -> list[str]:
    return [name for name in binaries if shutil.which(name) is None]


def apt_install(packages: tuple[str, ...]) -> None:
    """apt-get update + install, non-interactive; waits for a dpkg lock held by a parallel install."""
    if os.geteuid() != 0:
        raise InstallError(f"installing {' '.join(packages)} needs root (run as root or install them yourself)")
    if shutil.which("apt-get") is None:
        raise InstallError(f"no apt-get on this host: install {' '.join(packages)} with its package manager")
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
        apt_install(SLURM_PACKAGES)
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
        apt_install(ACCOUNTING_PACKAGES)
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
        apt_install(("shellcheck",))
    path = shutil.which("shellcheck")
    if path is None:
        raise InstallError("shellcheck still missing after install")
    return path
