"""The spec's users on the real local SLURM cluster (issue 43): the accounts script rendered from cluster.users makes
alice and bob (two groups) for real, the cluster's accounting gets the spec's teams, and jobs run, are refused and
are reported as those people.

The host's own accounts stay as they are: the daemons (and so the jobs) and every client command run in a mount
namespace of their own where /etc is a copy of this machine's, changed by the accounts script as a node's would be,
and /home an empty folder (the head node's homes).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from cluster.accounting import sacctmgr_script
from cluster.users import accounts_script
from cluster.verify.local_slurm import LocalSlurm
from spec import DeploymentSpec, parse_spec
from tests.cluster.conftest import with_cluster
from tests.launch.slurm_helpers import TERMINAL
from tests.waiting import wait_until

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[2]
GROUPS = [{"name": "pretraining", "gid": 2001}, {"name": "research", "gid": 2002}]
USERS = [
    {"name": "alice", "uid": 2101, "group": "pretraining", "admin": True},
    {"name": "bob", "uid": 2102, "group": "research"},
]
ACCOUNTING = {
    "enabled": True,
    "teams": [{"name": "pretraining", "members": ["alice"]}, {"name": "research", "members": ["bob"]}],
}
SACCT = "JobID,JobName,User,Account,Partition,AllocNodes,ElapsedRaw,Start,End,State,ExitCode,AllocTRES,Comment"

# Binds the node's /etc and /home over the host's, makes the spec's accounts there, then holds the namespace.
NAMESPACE_SCRIPT = """set -euo pipefail
mount --bind "$1/etc" /etc
mount --bind "$1/home" /home
CREATE_HOMES=true bash "$2" >"$1/accounts.log" 2>&1
echo ready
exec sleep infinity
"""


def people_spec() -> DeploymentSpec:
    return parse_spec(with_cluster(lambda cluster: cluster.update(users=USERS, groups=GROUPS, accounting=ACCOUNTING)))


class PeoplesSlurm(LocalSlurm):
    """A LocalSlurm whose daemons and client commands run where the spec's accounts exist."""

    holder: subprocess.Popen[str] | None = None

    def enter(self) -> list[str]:
        if self.holder is None or self.holder.poll() is not None:
            node = self.state_dir / "node"
            if not node.exists():
                node.mkdir()
                subprocess.run(["cp", "-a", "/etc", str(node / "etc")], check=True)
                (node / "home").mkdir(mode=0o755)
                spec = people_spec()
                assert spec.cluster is not None
                (node / "accounts.sh").write_text(accounts_script(spec.cluster.users, spec.cluster.groups))
            self.holder = subprocess.Popen(
                ["unshare", "--mount", "--propagation", "private", "bash", "-c", NAMESPACE_SCRIPT, "node",
                 str(node), str(node / "accounts.sh")],
                stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
            )  # fmt: skip
            assert self.holder.stdout is not None
            ready = self.holder.stdout.readline().strip()
            assert ready == "ready", (node / "accounts.log").read_text()
        return ["nsenter", f"--target={self.holder.pid}", "--mount", "--"]

    def _start(self, argv: list[str], name: str) -> None:
        super()._start([*self.enter(), *argv], name)

    def run(
        self, argv: Iterable[str], check: bool = True, timeout_s: float = 120.0
    ) -> subprocess.CompletedProcess[str]:
        return super().run([*self.enter(), *argv], check, timeout_s)

    def down(self, timeout_s: float = 20.0) -> None:
        super().down(timeout_s)
        if self.holder is not None:
            self.holder.kill()
            self.holder.wait()
            self.holder = None


@pytest.fixture(scope="module")
def cluster() -> Iterator[PeoplesSlurm]:
    state = Path(tempfile.mkdtemp(prefix="local-slurm-people-"))
    state.chmod(0o755)  # the users' sbatch reads slurm.conf under it
    spec = people_spec()
    assert spec.cluster is not None
    local = PeoplesSlurm(state, accounting=spec.cluster.accounting)
    try:
        local.up()
        script = local.run(["bash", "-c", sacctmgr_script(spec.cluster.accounting)])
        assert script.returncode == 0, script.stderr
        yield local
    finally:
        local.down()
        shutil.rmtree(state, ignore_errors=True)


@pytest.fixture(scope="module")
def outputs(cluster: PeoplesSlurm) -> Path:
    """A folder each user may write their job's output to (mode 1777, like /tmp)."""
    path = cluster.state_dir / "outputs"
    path.mkdir(mode=0o1777, exist_ok=True)
    path.chmod(0o1777)
    return path


def submit(cluster: PeoplesSlurm, user: str, outputs: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """sbatch as the user (runuser: their uid, primary group and groups, as a login would give them)."""
    command = ["runuser", "-u", user, "--", "sbatch", "--parsable", f"--chdir={outputs}", *args]
    return cluster.run(command, check=False)


def finished(cluster: PeoplesSlurm, job_id: str) -> dict[str, str]:
    wait_until(lambda: cluster.job(job_id).get("JobState") in TERMINAL, f"job {job_id} to end",
               story=lambda: str(cluster.job(job_id)))  # fmt: skip
    return cluster.job(job_id)


def test_jobs_run_as_the_spec_users_with_their_groups_and_their_own_account(
    cluster: PeoplesSlurm, outputs: Path
) -> None:
    ran: dict[str, str] = {}
    for user, team in (("alice", "pretraining"), ("bob", "research")):
        result = submit(cluster, user, outputs, "-A", team, f"--output={outputs}/{user}.out", "--wrap",
                        'id -un; id -gn; stat -c "%U %a" "$HOME"')  # fmt: skip
        assert result.returncode == 0, result.stderr
        ran[user] = result.stdout.strip().split(";")[0]
    for job_id in ran.values():
        assert finished(cluster, job_id)["JobState"] == "COMPLETED"
    assert (outputs / "alice.out").read_text().split("\n")[:3] == ["alice", "pretraining", "alice 700"]
    assert (outputs / "bob.out").read_text().split("\n")[:3] == ["bob", "research", "bob 700"]
    # Accounting knows the same people: sacct names each job's user, and llm-report sums per user.
    listing = cluster.run(["sacct", "--parsable2", "--allusers", "--allocations", f"--jobs={','.join(ran.values())}",
                           f"--format={SACCT}"]).stdout  # fmt: skip
    rows = [dict(zip(SACCT.split(","), line.split("|"), strict=True)) for line in listing.splitlines()[1:]]
    assert sorted((row["User"], row["Account"]) for row in rows) == [("alice", "pretraining"), ("bob", "research")]
    saved = outputs / "listing.txt"
    saved.write_text(listing)
    report = subprocess.run(
        [sys.executable, "-m", "planner.report", "--sacct-file", str(saved), "--by", "user", "--json"],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert report.returncode == 0, report.stderr
    assert '"alice"' in report.stdout and '"bob"' in report.stdout


def test_a_user_cannot_charge_another_teams_account(cluster: PeoplesSlurm, outputs: Path) -> None:
    refused = submit(cluster, "alice", outputs, "-A", "research", "--output=/dev/null", "--wrap", "true")
    assert refused.returncode != 0
    assert "Invalid account or account/partition combination specified" in refused.stderr


def test_only_the_admin_may_sudo_on_the_node(cluster: PeoplesSlurm) -> None:
    if shutil.which("sudo") is None:  # Debian's package; the tests run as root
        subprocess.run(["apt-get", "install", "-y", "-q", "sudo"], check=True, capture_output=True)
    assert "(ALL) NOPASSWD: ALL" in cluster.run(["sudo", "-l", "-U", "alice"]).stdout
    assert "User bob is not allowed to run sudo" in cluster.run(["sudo", "-l", "-U", "bob"]).stdout
