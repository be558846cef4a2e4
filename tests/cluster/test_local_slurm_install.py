"""cluster/verify/local_slurm/install.py: installers in parallel processes (xdist workers) take turns."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cluster.verify.local_slurm import install
from tests.waiting import wait_until, waits_on_a_lock

REPO = Path(__file__).resolve().parents[2]
# What ensure_shellcheck does, with the check for the binary inside the lock whether or not it is missing now.
SECOND_INSTALLER = """
from cluster.verify.local_slurm.install import apt_install
apt_install(("shellcheck",), unless_present=("shellcheck",))
print("installed")
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="apt-get needs root")
def test_a_second_installer_waits_for_the_first_and_then_finds_the_package_there() -> None:
    """Two `apt-get update` at once fail on apt's lists lock ('Unable to lock directory'): ours queue on a lock of
    their own, and the one that waited installs nothing when the binaries arrived meanwhile."""
    install.INSTALL_LOCK.parent.mkdir(parents=True, exist_ok=True)
    with install.INSTALL_LOCK.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        waiter = subprocess.Popen(
            [sys.executable, "-c", SECOND_INSTALLER],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_until(lambda: waits_on_a_lock(waiter.pid), "the second installer to queue on the lock")
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)
        out, err = waiter.communicate(timeout=900)
    assert waiter.returncode == 0, err
    assert out.split() == ["installed"] and install.missing_binaries(("shellcheck",)) == []


def test_the_lock_is_host_wide_not_per_checkout() -> None:
    assert not install.INSTALL_LOCK.is_relative_to(REPO)
