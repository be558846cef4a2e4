"""The head-node bootstrap for real: cluster/bootstrap/head_node.sh lays a payload built from this repo onto a
temporary directory standing for /fsx, builds the training env there from a local wheelhouse (no network at test
time: `make wheelhouse-test` downloads it beforehand), and the installed `llm-submit` renders an sbatch script for
the deployment spec the payload carries.

The env gets requirements-submit.txt (numpy, pydantic, pyyaml): what the submit command needs, a few MB of wheels;
requirements-node.txt would pull GBs of CUDA wheels (`make wheelhouse`, never run here)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster.image_config import BOOTSTRAP_DIR
from cluster.payload import build_payload
from cluster.verify.local_slurm import LocalSlurm
from spec import parse_spec
from tests.cluster.conftest import spec_dict
from tests.environments import ready
from tests.rehearsal.head_node import llama_sized_dataset

pytestmark = pytest.mark.bootstrap

REPO = Path(__file__).resolve().parents[2]
WHEELHOUSE = REPO / "build" / "wheelhouse-test"
# The interpreter the wheelhouse was downloaded for (its cp311 wheels), standing for the node's python3.11.
NODE_PYTHON = sys._base_executable
QUEUE = "h100"  # not the embedded default spec's queue name, so the output shows which spec was read


def node_python_version() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


@pytest.fixture(scope="module")
def wheelhouse() -> Path:
    return ready("wheelhouse-test")


def deployment(max_count: int = 2) -> tuple[Any, str]:
    data = spec_dict()
    data["cluster"]["queues"][0].update(name=QUEUE, max_count=max_count)
    spec = parse_spec(data)
    # As the cluster stack writes it (stacks/parts/cluster_assets.py).
    return spec, yaml.safe_dump(spec.model_dump(mode="json", exclude_none=True), sort_keys=False)


ACCOUNT_FILES = ("passwd", "group", "shadow", "gshadow", "login.defs")


def node_accounts_root(root: Path) -> Path:
    """A node root holding a copy of this machine's account files, for the accounts script's useradd --root."""
    etc = root / "etc"
    if not etc.exists():
        etc.mkdir(parents=True)
        for name in ACCOUNT_FILES:
            shutil.copy(Path("/etc") / name, etc / name)
        (root / "home").mkdir()  # the head node makes homes (CREATE_HOMES), under this root
    return root


def clean_env(root: Path, **extra: str) -> dict[str, str]:
    """A root shell's environment on the head node: no repo venv, no PYTHONPATH, system paths redirected. The default
    spec declares users, so head_node.sh's accounts script runs too: on a node root of the test's own (ACCOUNTS_ROOT),
    never on this machine's /etc and /home."""
    env = {key: value for key, value in os.environ.items() if key not in {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"}}
    env.update(SLURM_ETC=str(root / "slurm-etc"), PROFILE_D=str(root / "profile.d"), PYTHON_INSTALL="false")
    env.update(ACCOUNTS_ROOT=str(node_accounts_root(root / "node-root")))
    env.update(extra)
    return env


def head_node(
    root: Path, payload: Path, python_env: str | None, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    args = ["--cluster-name-tag", "deployment", "--shared-dir", str(root / "fsx"), "--payload", str(payload)]
    if python_env is not None:
        args += ["--python", NODE_PYTHON, "--python-env", python_env, "--requirements", "requirements-submit.txt"]
    return subprocess.run(
        ["bash", str(BOOTSTRAP_DIR / "head_node.sh"), *args], env=env, capture_output=True, text=True, timeout=300
    )


@dataclass(frozen=True)
class Deployed:
    root: Path
    payload: Path
    spec_yaml: str
    env: dict[str, str]
    python_env: str
    result: subprocess.CompletedProcess[str]

    @property
    def current(self) -> Path:
        return self.root / "fsx" / "llm-training"

    @property
    def release(self) -> Path:
        return self.current.resolve()


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path) -> Deployed:
    root = tmp_path_factory.mktemp("head-node")
    (root / "fsx").mkdir()
    spec, spec_yaml = deployment()
    payload = build_payload(spec, spec_yaml, root / "build")
    env = clean_env(root)
    python_env = f"wheelhouse:{wheelhouse}"
    return Deployed(root, payload, spec_yaml, env, python_env, head_node(root, payload, python_env, env))


def test_release_env_and_login_profile(deployed: Deployed) -> None:
    assert deployed.result.returncode == 0, deployed.result.stderr
    # The default spec's people were made on the test's node root, not on this machine.
    assert "the groups and users of cluster.users are in place" in deployed.result.stderr
    made = (deployed.root / "node-root" / "etc" / "passwd").read_text()
    assert "\nbob:x:2102:2002:" in made and "bob:" not in Path("/etc/passwd").read_text()
    current, release = deployed.current, deployed.release
    assert current.is_symlink() and os.readlink(current) == f"llm-training.releases/{release.name}"
    assert (release / "deployment.yaml").read_text() == deployed.spec_yaml
    for part in ("launch/submit.py", "spec/default.yaml", "cluster/health/prolog.sh", ".complete"):
        assert (release / part).is_file(), part
    python = release / ".venv" / "bin" / "python"
    probe = "import pydantic, yaml, importlib.util as u; print(pydantic.VERSION, u.find_spec('torch') is None)"
    versions = subprocess.run([python, "-I", "-c", probe], capture_output=True, text=True, check=True, cwd="/")
    assert versions.stdout.split() == ["2.14.3", "True"]  # the pinned submit set from the wheelhouse, no torch
    (pth,) = (release / ".venv" / "lib").glob("python3.*/site-packages/llm-training.pth")
    assert pth.read_text().strip() == str(release)
    profile = (deployed.root / "profile.d" / "llm-training.sh").read_text()
    assert f'export LLM_TRAINING_SPEC="{current}/deployment.yaml"' in profile
    assert f'export PATH="{current}/bin:$PATH"' in profile
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert sorted(path.name for path in (release / "bin").iterdir()) == sorted(scripts)
    assert all(os.access(release / "bin" / name, os.X_OK) for name in scripts)
    # An entry point runs its main with the release's env and spec, under its own name.
    guardrails = subprocess.run([release / "bin" / "llm-guardrails"], capture_output=True, text=True, cwd="/")
    assert guardrails.returncode == 0, guardrails.stderr
    assert json.loads(guardrails.stdout)["Statement"]
    usage = subprocess.run([release / "bin" / "llm-guardrails", "--bad"], capture_output=True, text=True, cwd="/")
    assert usage.returncode == 2 and usage.stderr.startswith("llm-guardrails: error: "), usage.stderr
    assert (deployed.root / "slurm-etc" / "scripts" / "prolog.d" / "90-llm-health.sh").is_file()


def test_tensorboard_and_every_entry_point_are_on_the_login_path(tmp_path: Path) -> None:
    """The launcher-building part of the bootstrap (cluster/bootstrap/login_env.sh, which head_node.sh runs from the
    release) on a release with a stand-in env, then the login profile: a login shell finds tensorboard (the env's,
    for docs/jobs.md's `tensorboard --logdir`) and every [project.scripts] command in the live release's bin/."""
    assert "tensorboard" in pins(REPO / "requirements-node.txt")  # what the env on the nodes really gets
    release = tmp_path / "fsx" / "llm-training.releases" / "r1"
    env_bin = release / ".venv" / "bin"
    env_bin.mkdir(parents=True)
    shutil.copy(REPO / "pyproject.toml", release / "pyproject.toml")
    (env_bin / "python").symlink_to(NODE_PYTHON)
    (env_bin / "tensorboard").write_text('#!/bin/sh\necho "tensorboard from the release env: $*"\n')
    (env_bin / "tensorboard").chmod(0o755)
    current = tmp_path / "fsx" / "llm-training"
    current.symlink_to("llm-training.releases/r1")
    script = str(BOOTSTRAP_DIR / "login_env.sh")
    for args in (["launchers", str(release)], ["profile", str(current), str(tmp_path / "profile.d")]):
        result = subprocess.run(["bash", script, *args], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    names = ["tensorboard", *scripts]
    profile = tmp_path / "profile.d" / "llm-training.sh"
    login = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}  # a fresh login: only what the profile adds
    probe = f"source {profile} && command -v {' '.join(names)} && tensorboard --logdir /fsx/runs --port 6006"
    result = subprocess.run(["bash", "-c", probe], env=login, capture_output=True, text=True, cwd="/", timeout=60)
    assert result.returncode == 0, result.stderr
    *found, said = result.stdout.splitlines()
    assert found == [f"{current}/bin/{name}" for name in names]
    assert said == "tensorboard from the release env: --logdir /fsx/runs --port 6006"
    # Without tensorboard in the env (a requirements-submit.txt env), it is left off PATH with a note.
    (env_bin / "tensorboard").unlink()
    result = subprocess.run(["bash", script, "launchers", str(release)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert f"head_node: tensorboard is not in the env of {release}" in result.stderr


def test_the_runbooks_shared_directories_are_made_for_every_user(deployed: Deployed) -> None:
    assert deployed.result.returncode == 0, deployed.result.stderr
    for name in ("data", "runs", "containers", "fabric-checks"):
        made = (deployed.root / "fsx" / name).stat()
        assert (made.st_uid, stat.S_IMODE(made.st_mode)) == (0, 0o1777), name
        assert f"head_node: created {deployed.root}/fsx/{name} (root, 1777" in deployed.result.stderr
    # An existing directory is the admin's choice: a rerun leaves it alone.
    (deployed.root / "fsx" / "runs").chmod(0o755)
    again = head_node(deployed.root, deployed.payload, deployed.python_env, deployed.env)
    assert again.returncode == 0, again.stderr
    assert stat.S_IMODE((deployed.root / "fsx" / "runs").stat().st_mode) == 0o755
    assert "created" not in again.stderr


def test_llm_submit_renders_the_deployed_spec(deployed: Deployed, tmp_path: Path) -> None:
    assert deployed.result.returncode == 0, deployed.result.stderr
    data = llama_sized_dataset(tmp_path / "corpus")
    options = ["--backend", "fsdp", "--nodes", "2", "--data-prefix", str(data), "--run-dir", str(tmp_path / "run")]
    model = f"{deployed.current}/training/configs/llama3-8b.yaml"
    login = {**deployed.env, "PATH": "/usr/bin:/bin"}
    profile = deployed.root / "profile.d" / "llm-training.sh"
    command = f"source {profile} && llm-submit --model {model} {' '.join(options)} --dry-run"
    result = subprocess.run(["bash", "-c", command], env=login, capture_output=True, text=True, cwd="/", timeout=120)
    assert result.returncode == 0, result.stderr
    release = deployed.release
    script = result.stdout
    assert script.startswith(f"# ===== {tmp_path / 'run'}.fsdp.sbatch =====\n#!/bin/bash\n")
    assert f"#SBATCH --partition={QUEUE}\n" in script  # the deployment.yaml from the payload, not spec/default.yaml
    assert "#SBATCH --nodes=2\n" in script and "NPROC_PER_NODE=8\n" in script
    assert f"PYTHON={release}/.venv/bin/python\n" in script
    assert f"TORCHRUN={release}/.venv/bin/torchrun\n" in script
    assert f"WORKDIR={release}\n" in script  # jobs keep their release when a newer one is laid out

    # The env's python without the login profile falls back to the embedded default spec.
    python = f"{deployed.current}/.venv/bin/python"
    bare = subprocess.run(
        [python, "-m", "launch.submit", "--model", model, *options, "--dry-run"],
        env=login,
        capture_output=True,
        text=True,
        cwd="/",
        timeout=120,
    )
    assert bare.returncode == 0, bare.stderr
    assert "#SBATCH --partition=gpu\n" in bare.stdout


def test_rerun_with_the_same_payload_rebuilds_nothing(deployed: Deployed) -> None:
    assert deployed.result.returncode == 0, deployed.result.stderr
    release = deployed.release
    venv_stamp = (release / ".venv" / "pyvenv.cfg").stat().st_mtime_ns
    again = head_node(deployed.root, deployed.payload, deployed.python_env, deployed.env)
    assert again.returncode == 0, again.stderr
    assert f"head_node: release {release.name} is already built in {release}" in again.stderr
    assert deployed.release == release
    assert (release / ".venv" / "pyvenv.cfg").stat().st_mtime_ns == venv_stamp


def test_new_payloads_switch_releases_and_keep_all_when_slurm_cannot_say_which_jobs_use_them(
    tmp_path: Path, wheelhouse: Path
) -> None:
    """Switching releases; with no controller answering squeue, no release is removed (a queued job may name any of
    them). tests/cluster/test_head_node_releases_slurm.py removes them with a controller that answers."""
    (tmp_path / "fsx").mkdir()
    current = tmp_path / "fsx" / "llm-training"
    releases: list[Path] = []
    # The internet path with pip pointed at the local wheelhouse through its own environment variables.
    pip_offline = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheelhouse), "PIP_CONFIG_FILE": os.devnull}
    no_slurm = {"SLURM_CONF": str(tmp_path / "no-such-slurm.conf"), "SLURM_BIN": str(tmp_path / "no-slurm-bin")}
    for max_count, python_env in ((2, "internet"), (3, None), (4, None)):
        spec, spec_yaml = deployment(max_count)
        payload = build_payload(spec, spec_yaml, tmp_path / f"build-{max_count}")
        result = head_node(tmp_path, payload, python_env, clean_env(tmp_path, **pip_offline, **no_slurm))
        assert result.returncode == 0, result.stderr
        releases.append(current.resolve())
        assert f"max_count: {max_count}\n" in (current / "deployment.yaml").read_text()
        assert (current / ".venv" / "bin" / "python").is_file() == (python_env is not None)
        assert ("from the package index (requirements-submit.txt)" in result.stderr) == (python_env is not None)
    first, previous, latest = releases
    assert len({first, previous, latest}) == 3
    folder = tmp_path / "fsx" / "llm-training.releases"
    assert (
        f"head_node: Slurm cannot list its jobs (squeue failed or timed out): every release in {folder} kept"
        in result.stderr
    )
    result = head_node(tmp_path, payload, None, clean_env(tmp_path, **no_slurm))  # the live release again
    assert result.returncode == 0, result.stderr
    assert current.resolve() == latest
    assert sorted(p.name for p in folder.iterdir()) == sorted([first.name, previous.name, latest.name])


def test_wheelhouse_without_a_pinned_package_names_it(tmp_path: Path, wheelhouse: Path) -> None:
    partial = tmp_path / "wheels"
    partial.mkdir()
    for wheel in wheelhouse.glob("*.whl"):
        if not wheel.name.lower().startswith("pyyaml-"):
            shutil.copy(wheel, partial)
    (tmp_path / "fsx").mkdir()
    spec, spec_yaml = deployment()
    payload = build_payload(spec, spec_yaml, tmp_path / "build")
    result = head_node(tmp_path, payload, f"wheelhouse:{partial}", clean_env(tmp_path))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"head_node: wheelhouse {partial} has no wheel of pyyaml==6.0.3 for Python {node_python_version()} "
        f"(rebuild it: make wheelhouse WHEELHOUSE_PYTHON={node_python_version()})"
    )
    assert not (tmp_path / "fsx" / "llm-training").exists()  # nothing switched to the broken release


def pins(path: Path) -> dict[str, str]:
    lines = (line.split("#")[0].strip() for line in path.read_text().splitlines())
    return {name.lower(): version for name, version in (line.split("==") for line in lines if line)}


def test_submit_requirements_are_node_requirements_with_the_same_pins() -> None:
    submit, node = pins(REPO / "requirements-submit.txt"), pins(REPO / "requirements-node.txt")
    assert submit and all(node.get(name) == version for name, version in submit.items()), submit


def test_the_head_node_starts_its_exporters_from_the_release_env(deployed: Deployed, tmp_path: Path) -> None:
    """Run again as on a node with systemd (a fake systemctl, aws and node root): observability.sh runs from the new
    release; the Slurm exporter and the target refresher run on the release's env, which has prometheus-client
    from the wheelhouse; the binaries not staged in the wheelhouse's observability/ are skipped with a warning."""
    assert deployed.result.returncode == 0, deployed.result.stderr
    url = "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-12345678-abcd-ef01-2345-6789abcdef01/api/v1/remote_write"
    tools = tmp_path / "bin"
    tools.mkdir()
    for name, body in (("aws", f"echo {url}"), ("systemctl", f'echo "$@" >> {tmp_path}/systemctl.log')):
        (tools / name).write_text(f"#!/bin/sh\n{body}\n")
        (tools / name).chmod(0o755)
    node = tmp_path / "node"
    env = {**deployed.env, "OBSERVABILITY_NODE_ROOT": str(node), "AWS": str(tools / "aws"),
           "SYSTEMCTL": str(tools / "systemctl")}  # fmt: skip
    result = head_node(deployed.root, deployed.payload, deployed.python_env, env)
    assert result.returncode == 0, result.stderr
    assert (
        "observability/node_exporter-1.8.2.linux-amd64.tar.gz not found: node_exporter not installed" in result.stderr
    )
    assert "observability/prometheus_2.42.0+ds-5+deb12u1_amd64.deb not found: prometheus not installed" in result.stderr
    units = sorted(p.name for p in (node / "etc" / "systemd" / "system").iterdir())
    assert units == ["llm-prometheus-targets.service", "llm-slurm-exporter.service"]
    exporter = (node / "etc/systemd/system/llm-slurm-exporter.service").read_text()
    python = f"{deployed.current}/.venv/bin/python"
    assert f"ExecStart={python} -m cluster.observability.slurm_exporter --port 9341" in exporter
    probe = subprocess.run(
        [python, "-I", "-c", "import prometheus_client, cluster.observability.slurm_exporter"], capture_output=True,
        text=True, cwd="/",
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr
    assert "remote_write" in (node / "etc/llm-prometheus/prometheus.yml").read_text()


def test_llm_report_runs_in_the_release_env_on_sacct_output(deployed: Deployed) -> None:
    """llm-report beside llm-submit: the submit env (no torch) runs it on sacct output recorded from slurmdbd."""
    assert deployed.result.returncode == 0, deployed.result.stderr
    recorded = REPO / "tests" / "planner" / "fixtures" / "sacct-local-slurmdbd.txt"
    login = {**deployed.env, "PATH": "/usr/bin:/bin"}
    profile = deployed.root / "profile.d" / "llm-training.sh"
    command = f"source {profile} && llm-report --sacct-file {recorded} --by user --price local=3600"
    result = subprocess.run(["bash", "-c", command], env=login, capture_output=True, text=True, cwd="/", timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split()[:3] == ["user", "jobs", "node-hours"]
    assert lines[-1].split()[:2] == ["total", "4"]


@pytest.mark.slurm
def test_the_reservation_hold_timer_runs_from_the_live_release_env(
    deployed: Deployed, tmp_path: Path, local_slurm: LocalSlurm
) -> None:
    """Run again as on a head node with systemd (a fake systemctl): the timer and its service pass systemd's own
    check (`systemd-analyze verify`), and the service's command, run as the unit says (its directory, PATH and
    ExecStart), answers the local SLURM cluster from the release's env (cluster/reservation_holds.py)."""
    assert deployed.result.returncode == 0, deployed.result.stderr
    systemctl = tmp_path / "systemctl"
    systemctl.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/systemctl.log\n')
    systemctl.chmod(0o755)
    units = tmp_path / "systemd"
    env = {**deployed.env, "SYSTEMD_DIR": str(units), "SYSTEMCTL": str(systemctl), "SLURM_BIN": "/usr/bin"}
    result = head_node(deployed.root, deployed.payload, deployed.python_env, env)
    assert result.returncode == 0, result.stderr
    assert "head_node: llm-reservation-holds.timer: every minute" in result.stderr
    assert (tmp_path / "systemctl.log").read_text() == "daemon-reload\nenable --now llm-reservation-holds.timer\n"
    service, timer = units / "llm-reservation-holds.service", units / "llm-reservation-holds.timer"
    verify = subprocess.run(["systemd-analyze", "verify", str(service), str(timer)], capture_output=True, text=True)
    assert verify.returncode == 0, verify.stderr
    settings = dict(
        line.split("=", 1) for line in service.read_text().splitlines() if "=" in line and not line.startswith("#")
    )
    assert settings["WorkingDirectory"] == str(deployed.current)  # the live release: an update switches it
    path = settings["Environment"].removeprefix("PATH=")
    ran = subprocess.run(
        [*settings["ExecStart"].split(), "--dry-run"], cwd=settings["WorkingDirectory"], capture_output=True,
        text=True, env={"PATH": path, "SLURM_CONF": str(local_slurm.conf_path)}, timeout=120,
    )  # fmt: skip
    assert (ran.returncode, ran.stdout) == (0, ""), ran.stderr
