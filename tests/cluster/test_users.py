"""The accounts script (cluster/users.py, issue 43) run for real, as root, the way a node runs it: useradd, groupadd,
usermod and the sudoers files on a copy of this machine's /etc, bound over /etc in a mount namespace of its own (with
an empty /home), so `id`, `getent` and `sudo -l` answer from what the script made and the host is left as it was."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster.payload import build_payload, deployment_yaml
from cluster.users import accounts_script
from cluster.verify.local_slurm.install import ensure_shellcheck
from spec import DeploymentSpec, parse_spec
from tests.cluster.conftest import with_cluster
from tests.cluster.test_bootstrap import GPU_ARGS, fixture_node, run
from tests.cluster.test_head_node_env import clean_env, head_node

GROUPS = [{"name": "pretraining", "gid": 2001}, {"name": "research", "gid": 2002}]
USERS = [
    {"name": "alice", "uid": 2101, "group": "pretraining", "admin": True},
    {"name": "bob", "uid": 2102, "group": "research", "groups": ["pretraining"]},
    {"name": "carol", "uid": 2103, "group": "research"},
]


def people_spec() -> DeploymentSpec:
    return parse_spec(with_cluster(lambda cluster: cluster.update(users=USERS, groups=GROUPS)))


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec = people_spec()
    assert spec.cluster is not None
    path = tmp_path_factory.mktemp("accounts") / "accounts.sh"
    path.write_text(accounts_script(spec.cluster.users, spec.cluster.groups))
    return path


@pytest.fixture(scope="module")
def visudo() -> str:
    """sudo's own checker and `sudo -l` (Debian's package; the tests run as root)."""
    if shutil.which("visudo") is None:
        subprocess.run(["apt-get", "install", "-y", "-q", "sudo"], check=True, capture_output=True)
    found = shutil.which("visudo")
    assert found, "sudo is not installed and apt-get could not install it"
    return found


class Node:
    """A node's /etc and /home: a copy of this machine's /etc and an empty /home, seen at /etc and /home only by
    the commands `run` starts (each in a new mount namespace, so state carries over from one run to the next)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        subprocess.run(["cp", "-a", "/etc", str(root / "etc")], check=True)
        (root / "home").mkdir(mode=0o755)

    def run(self, commands: str, **env: str) -> subprocess.CompletedProcess[str]:
        exports = "".join(f"export {key}={value}; " for key, value in env.items())
        inner = f'mount --bind "$1/etc" /etc && mount --bind "$1/home" /home && {exports}{commands}'
        return subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "bash", "-c", inner, "node", str(self.root)],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

    def accounts(self, script: Path, head: bool = False) -> subprocess.CompletedProcess[str]:
        return self.run(f"bash {script}", CREATE_HOMES="true" if head else "false")

    def answer(self, commands: str) -> str:
        result = self.run(commands)
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout


@pytest.fixture
def head(tmp_path: Path) -> Node:
    (tmp_path / "head").mkdir()
    return Node(tmp_path / "head")


@pytest.fixture
def compute(tmp_path: Path) -> Node:
    (tmp_path / "compute").mkdir()
    return Node(tmp_path / "compute")


PEOPLE = "getent passwd alice bob carol; getent group pretraining research; id -Gn alice; id -Gn bob; id -Gn carol"


def test_the_head_node_and_a_compute_node_get_the_same_people_and_only_admins_get_sudo(
    script: Path, head: Node, compute: Node, visudo: str
) -> None:
    made = head.accounts(script, head=True)
    assert made.returncode == 0, made.stdout + made.stderr
    assert "accounts: added user bob (uid 2102, group research, groups pretraining)" in made.stdout
    assert compute.accounts(script).returncode == 0
    people = head.answer(PEOPLE)
    assert people == compute.answer(PEOPLE)  # the same uid, gid and groups on every node: /fsx means one person
    assert people.splitlines() == [
        "alice:x:2101:2001::/home/alice:/bin/bash",
        "bob:x:2102:2002::/home/bob:/bin/bash",
        "carol:x:2103:2002::/home/carol:/bin/bash",
        "pretraining:x:2001:bob",
        "research:x:2002:",
        "pretraining",
        "research pretraining",
        "research",
    ]
    assert head.answer("stat -c '%U %a' /home/alice /home/bob").split("\n")[:2] == ["alice 700", "bob 700"]
    assert compute.answer("ls -A /home") == ""  # the head node's /home is NFS-shared with the compute nodes
    assert head.answer(f"{visudo} -c -q && echo valid").strip() == "valid"
    assert "(ALL) NOPASSWD: ALL" in head.answer("sudo -l -U alice")
    for user in ("bob", "carol"):
        assert f"User {user} is not allowed to run sudo" in head.answer(f"sudo -l -U {user}")
    assert head.answer("stat -c '%U %a' /etc/sudoers.d/90-llm-admins").strip() == "root 440"


def test_a_second_run_adds_nothing_and_puts_a_users_groups_back(script: Path, compute: Node) -> None:
    assert compute.accounts(script).returncode == 0
    before = compute.answer("cat /etc/passwd /etc/group")
    compute.answer("usermod --groups '' bob")  # by hand, on one node
    again = compute.accounts(script)
    assert again.returncode == 0, again.stderr
    assert "added" not in again.stdout
    assert compute.answer("cat /etc/passwd /etc/group") == before
    assert compute.answer("id -Gn bob").split() == ["research", "pretraining"]


@pytest.mark.parametrize(
    ("already", "holder", "error"),
    [
        (
            "useradd --uid 2999 carol",
            "passwd carol",
            "accounts: user carol has uid 2999 on this node, the spec says 2103",
        ),
        ("useradd --uid 2101 dave", "passwd dave", "accounts: uid 2101 of user alice is user dave's on this node"),
        ("groupadd --gid 2002 ops", "group ops", "accounts: gid 2002 of group research is group ops's on this node"),
        (
            "groupadd --gid 2999 research",
            "group research",
            "accounts: group research has gid 2999 on this node, the spec says 2002",
        ),
    ],
    ids=["user-renumbered", "uid-taken", "gid-taken", "group-renumbered"],
)
def test_a_name_or_id_another_account_holds_fails_naming_both_and_renumbers_nothing(
    script: Path, compute: Node, already: str, holder: str, error: str
) -> None:
    compute.answer(already)
    holders = f"getent {holder}"
    before = compute.answer(holders)
    result = compute.accounts(script)
    assert result.returncode == 1
    assert error in result.stderr
    assert compute.answer(holders) == before  # the other account as it was


def test_ssm_user_loses_the_sudo_the_agent_gave_it(script: Path, compute: Node, visudo: str) -> None:
    compute.answer(
        "useradd --uid 1001 ssm-user && printf 'ssm-user ALL=(ALL) NOPASSWD:ALL\\n' >/etc/sudoers.d/ssm-agent-users"
        " && chmod 0440 /etc/sudoers.d/ssm-agent-users"
    )
    assert "NOPASSWD: ALL" in compute.answer("sudo -l -U ssm-user")
    assert compute.accounts(script).returncode == 0
    assert "User ssm-user is not allowed to run sudo" in compute.answer("sudo -l -U ssm-user")


def etc_copy(root: Path) -> Path:
    """The account files of this machine, as a node root's /etc for useradd --root."""
    etc = root / "etc"
    etc.mkdir(parents=True)
    for name in ("passwd", "group", "shadow", "gshadow", "login.defs"):
        shutil.copy(Path("/etc") / name, etc / name)
    return etc


def test_the_head_node_makes_the_people_from_its_payload_and_a_gpu_node_the_same_from_the_release(
    tmp_path: Path,
) -> None:
    """head_node.sh runs users/accounts.sh from the payload (homes made) and lays it into the release on /fsx;
    gpu_node.sh runs it from there. Each on a node root of its own (useradd --root)."""
    spec = people_spec()
    payload = build_payload(spec, deployment_yaml(spec), tmp_path / "build")
    head_root, fsx = tmp_path / "head", tmp_path / "head" / "fsx"
    head_etc = etc_copy(head_root)
    (head_root / "home").mkdir()
    fsx.mkdir()
    result = head_node(head_root, payload, None, clean_env(head_root, ACCOUNTS_ROOT=str(head_root)))
    assert result.returncode == 0, result.stderr
    assert "the groups and users of cluster.users are in place" in result.stderr
    assert (head_root / "home" / "alice").is_dir()
    env = fixture_node(tmp_path / "gpu", efa=32, gpus=8)
    gpu_etc = etc_copy(tmp_path / "gpu" / "root")
    result = run("gpu_node.sh", [*GPU_ARGS, "--shared-dir", str(fsx)], env)
    assert result.returncode == 0, result.stderr
    people = [line for line in (gpu_etc / "passwd").read_text().splitlines() if line.split(":")[0] in ("alice", "bob")]
    assert people == [
        "alice:x:2101:2001::/home/alice:/bin/bash",
        "bob:x:2102:2002::/home/bob:/bin/bash",
    ]
    assert (head_etc / "passwd").read_text().splitlines()[-3:] == (gpu_etc / "passwd").read_text().splitlines()[-3:]
    admins = (gpu_etc / "sudoers.d" / "90-llm-admins").read_text()
    assert admins.splitlines()[1:] == ["alice ALL=(ALL) NOPASSWD: ALL"]
    assert not (tmp_path / "gpu" / "root" / "home").exists()  # /home is the head node's, NFS-shared


@pytest.fixture(autouse=True)
def _host_untouched() -> Iterator[None]:
    before = Path("/etc/passwd").read_text(), Path("/etc/group").read_text()
    yield
    assert (Path("/etc/passwd").read_text(), Path("/etc/group").read_text()) == before


def test_the_rendered_script_is_shellcheck_clean(script: Path) -> None:
    result = subprocess.run([ensure_shellcheck(), str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
