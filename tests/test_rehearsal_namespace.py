"""The head-node rehearsal's user survives a package install on the host: useradd renames a new /etc/passwd into
place, which lazily unmounts whatever another mount namespace mounted over that file. Under pytest-xdist a test on
the other worker can install a package (Prometheus adds its system user) while the rehearsal's jobs run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# In a private mount namespace: add the user, say so, wait for the host's rename, then look the user up again.
SCRIPT = """
import pwd, sys
from pathlib import Path
from tests.rehearsal.head_node import add_user
user = add_user(Path(sys.argv[1]))
print("ready", flush=True)
sys.stdin.readline()
print(pwd.getpwuid(user.uid).pw_name, flush=True)
"""


def _rename_passwd_in_place() -> None:
    """What useradd does to /etc/passwd, with the same content: a new file renamed over the old one."""
    fresh = Path("/etc/passwd.rehearsal-test")
    shutil.copy2("/etc/passwd", fresh)
    os.replace(fresh, "/etc/passwd")


@pytest.mark.skipif(os.geteuid() != 0, reason="mount namespaces and /etc/passwd need root")
def test_the_rehearsal_user_outlives_a_new_etc_passwd_on_the_host(tmp_path: Path) -> None:
    command = ["unshare", "--mount", "--propagation", "private", sys.executable, "-c", SCRIPT, str(tmp_path)]
    with subprocess.Popen(
        command, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        assert process.stdout is not None and process.stdin is not None
        assert process.stdout.readline().strip() == "ready", process.stderr.read() if process.stderr else ""
        _rename_passwd_in_place()
        stdout, stderr = process.communicate("go\n", timeout=60)
    assert process.returncode == 0, stderr
    assert stdout.strip() == "ec2-user"
    assert "ec2-user" not in Path("/etc/passwd").read_text()  # the host never saw the user
