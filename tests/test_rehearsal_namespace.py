"""The head-node rehearsal's accounts stay in its namespace and survive a package install on the host. The rehearsal
binds a copy of /etc and an empty /home over the real ones, and head_node.sh's accounts script (users/accounts.sh,
rendered from the default spec's cluster.users) makes the spec's people there with useradd, homes included: the host's
/etc/passwd and /home never see them. useradd renames a new /etc/passwd into place, which lazily unmounts whatever
another mount namespace mounted over that file; under pytest-xdist a test on the other worker can install a package
(Prometheus adds its system user) while the rehearsal's jobs run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# In a private mount namespace: the rehearsal's /etc and /home, the default spec's accounts made as head_node.sh makes
# them, then wait for the host's rename and look the researcher up again.
SCRIPT = """
import os, pwd, subprocess, sys
from pathlib import Path
from cluster.users import accounts_script
from spec import load_spec
from tests.rehearsal.head_node import private_accounts, reader
work = Path(sys.argv[1])
private_accounts(work)
cluster = load_spec().cluster
script = work / "accounts.sh"
script.write_text(accounts_script(cluster.users, cluster.groups))
subprocess.run(["bash", str(script)], env={**os.environ, "CREATE_HOMES": "true"}, check=True, capture_output=True)
print("ready", flush=True)
sys.stdin.readline()
user = reader(Path("spec/default.yaml"))
print(pwd.getpwuid(user.uid).pw_name, user.home, oct(user.home.stat().st_mode & 0o777), flush=True)
"""


def _rename_passwd_in_place() -> None:
    """What useradd does to /etc/passwd, with the same content: a new file renamed over the old one."""
    fresh = Path("/etc/passwd.rehearsal-test")
    shutil.copy2("/etc/passwd", fresh)
    os.replace(fresh, "/etc/passwd")


@pytest.mark.skipif(os.geteuid() != 0, reason="mount namespaces and /etc/passwd need root")
def test_the_rehearsals_accounts_stay_in_its_namespace_and_outlive_a_new_etc_passwd_on_the_host(
    tmp_path: Path,
) -> None:
    host_homes = sorted(os.listdir("/home"))
    command = ["unshare", "--mount", "--propagation", "private", sys.executable, "-c", SCRIPT, str(tmp_path)]
    with subprocess.Popen(
        command, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        assert process.stdout is not None and process.stdin is not None
        assert process.stdout.readline().strip() == "ready", process.stderr.read() if process.stderr else ""
        _rename_passwd_in_place()
        stdout, stderr = process.communicate("go\n", timeout=60)
    assert process.returncode == 0, stderr
    assert stdout.split() == ["bob", "/home/bob", "0o700"]
    passwd = Path("/etc/passwd").read_text()
    assert not [line for line in passwd.splitlines() if line.split(":")[0] in ("alice", "bob")]  # the host's as before
    assert sorted(os.listdir("/home")) == host_homes
    assert (tmp_path / "home-root" / "bob").is_dir()  # the homes went to the rehearsal's own /home
