"""The node bootstrap scripts: shellcheck-clean, and run for real against fixture trees
(sysfs/dev directories and a node root in tmp_path) where hardware would be."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml

from cluster.config_builder import build_cluster_config, example_refs
from cluster.image_config import BOOTSTRAP_DIR, build_image_config, main, render_component
from cluster.nxdt_wheelhouse import lock_from_wheels, patches_tsv
from spec import load_spec
from spec.platform.neuron import NEURON_RELEASES, NXDT_RELEASES, nxdt_requirements
from tests.cluster.conftest import ALL_SPECS

SCRIPTS = sorted(BOOTSTRAP_DIR.glob("*.sh"))
TRN1_SPEC = next(p for p in ALL_SPECS if p.name == "trn1-neuron.yaml")
PINS = ",".join(f"{name}={version}" for name, version in NEURON_RELEASES["2.26.1"].items())


@pytest.fixture(scope="module")
def shellcheck() -> str:
    found = shutil.which("shellcheck")
    if found is None:  # Debian's package; the tests run as root
        subprocess.run(["apt-get", "install", "-y", "-q", "shellcheck"], check=True, capture_output=True)
        found = shutil.which("shellcheck")
    assert found, "shellcheck is not installed and apt-get could not install it"
    return found


def test_scripts_are_shellcheck_clean(shellcheck: str) -> None:
    assert {p.name for p in SCRIPTS} == {
        *("gpu_node.sh", "head_node.sh", "login_env.sh", "neuron_install.sh", "nxdt_install.sh", "observability.sh"),
        "trn1_node.sh",
    }
    result = subprocess.run([shellcheck, "-x", *map(str, SCRIPTS)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_rendered_neuron_component_is_shellcheck_clean(shellcheck: str, tmp_path: Path) -> None:
    component = tmp_path / "neuron_component.sh"
    component.write_text(render_component(load_spec(TRN1_SPEC)))
    result = subprocess.run([shellcheck, str(component)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
    assert f"NEURON_PINS=${{NEURON_PINS:-{PINS}}}" in component.read_text()


def executable(path: Path, body: str) -> Path:
    path.write_text("#!/usr/bin/env bash\n" + body)
    path.chmod(0o755)
    return path


def fixture_node(tmp_path: Path, efa: int, gpus: int = 0, neuron: int = 0) -> dict[str, str]:
    sysfs, dev, root = tmp_path / "sys", tmp_path / "dev", tmp_path / "root"
    for i in range(efa):
        (sysfs / "class" / "infiniband" / f"rdmap{i}s0").mkdir(parents=True)
    dev.mkdir()
    for i in range(neuron):
        (dev / f"neuron{i}").touch()
    root.mkdir()
    lines = "".join(f"echo {i}\n" for i in range(gpus))
    env = {
        **os.environ,
        "NODE_ROOT": str(root),
        "SYSFS_ROOT": str(sysfs),
        "DEV_ROOT": str(dev),
        "NVIDIA_SMI": str(executable(tmp_path / "nvidia-smi", lines)),
        "FI_INFO": str(executable(tmp_path / "fi_info", 'echo "provider: efa"\n')),
        # Never the host's own: the tests run as root.
        "SYSCTL": str(executable(tmp_path / "sysctl", f'echo "sysctl $*" >>{tmp_path}/tools.log\n')),
        "LCTL": str(executable(tmp_path / "lctl", f'echo "lctl $*" >>{tmp_path}/tools.log\n')),
    }
    return env


def run(script: str, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(BOOTSTRAP_DIR / script), *args], env=env, capture_output=True, text=True)


GPU_ARGS = ["--gpus", "8", "--efa-devices", "32", "--pyxis", "true", "--enroot-dir", "/scratch/enroot"]


SQSH = "/fsx/containers/llm-nemo-efa-26.08-efa1.43.2.sqsh"
ECR_IMAGE = "111111111111.dkr.ecr.us-east-1.amazonaws.com/llm-nemo-efa:26.08-efa1.43.2"


def test_gpu_node_configures_enroot_on_local_disk(tmp_path: Path) -> None:
    env = fixture_node(tmp_path, efa=32, gpus=8)
    result = run("gpu_node.sh", [*GPU_ARGS, "--container-image", SQSH], env)
    assert result.returncode == 0, result.stderr
    root = tmp_path / "root"
    enroot = (root / "etc/enroot/enroot.conf").read_text()
    assert "ENROOT_RUNTIME_PATH /run/enroot/user-$(id -u)" in enroot
    assert "ENROOT_DATA_PATH /scratch/enroot/data/user-$(id -u)" in enroot
    # The prolog makes each job user's directories under root's parents (tests/cluster/test_health_enroot.py); EFA's
    # /dev/infiniband stays visible.
    assert (root / "run/enroot").stat().st_mode & 0o7777 == 0o755
    assert "ENROOT_RESTRICT_DEV no" in enroot.splitlines()
    assert "ENROOT_CONFIG_PATH" not in enroot  # a .sqsh needs no registry login
    assert "/fsx" not in enroot
    assert (root / "scratch/enroot/cache").is_dir()
    assert (root / "etc/llm-health/health.env").read_text().splitlines() == [
        "HEALTH_EXPECTED_GPUS=8",
        "HEALTH_EXPECTED_NEURON=0",
        "HEALTH_EXPECTED_EFA=32",
        "HEALTH_USER_DIRS=/run/enroot /scratch/enroot/data /scratch/enroot/cache /scratch/enroot/tmp",
    ]
    profile = (root / "etc/profile.d/llm-efa.sh").read_text()
    assert "export FI_PROVIDER=efa" in profile and 'export NCCL_NET="AWS Libfabric"' in profile
    assert "export LD_LIBRARY_PATH=/opt/amazon/efa/lib:/opt/amazon/ofi-nccl/lib:" in profile
    assert (root / "etc/llm-cluster/container-image").read_text().strip() == SQSH


def test_gpu_node_logs_enroot_into_ecr_with_the_node_role(tmp_path: Path) -> None:
    env = fixture_node(tmp_path, efa=32, gpus=8)
    result = run("gpu_node.sh", [*GPU_ARGS, "--container-image", ECR_IMAGE], env)
    assert result.returncode == 0, result.stderr
    root = tmp_path / "root"
    assert "ENROOT_CONFIG_PATH /etc/enroot/config" in (root / "etc/enroot/enroot.conf").read_text().splitlines()
    assert (root / "etc/enroot/config/.credentials").read_text() == (
        "machine 111111111111.dkr.ecr.us-east-1.amazonaws.com login AWS password "
        "$(aws ecr get-login-password --region us-east-1)\n"
    )


def test_gpu_node_fails_on_missing_efa_devices(tmp_path: Path) -> None:
    env = fixture_node(tmp_path, efa=16, gpus=8)
    result = run("gpu_node.sh", GPU_ARGS, env)
    assert result.returncode == 1
    assert result.stderr.strip().startswith("gpu_node: found 16 EFA devices in ")
    assert "expected 32" in result.stderr


def test_gpu_node_fails_without_the_efa_provider(tmp_path: Path) -> None:
    env = fixture_node(tmp_path, efa=32, gpus=8)
    env["FI_INFO"] = str(executable(tmp_path / "fi_info_none", "exit 61\n"))
    result = run("gpu_node.sh", GPU_ARGS, env)
    assert result.returncode == 1
    assert "fi_info -p efa finds no EFA provider" in result.stderr


def test_gpu_node_fails_on_missing_gpus_and_bad_arguments(tmp_path: Path) -> None:
    env = fixture_node(tmp_path, efa=32, gpus=7)
    assert "found 7 GPUs, expected 8" in run("gpu_node.sh", GPU_ARGS, env).stderr
    assert "unknown argument --gpu " in run("gpu_node.sh", ["--gpu", "8"], env).stderr
    assert "--gpus must be a whole number, not 'eight'" in run("gpu_node.sh", ["--gpus", "eight"], env).stderr


def test_gpu_node_points_the_prolog_at_shared_and_scratch_storage(tmp_path: Path) -> None:
    env = fixture_node(tmp_path, efa=32, gpus=8)
    result = run("gpu_node.sh", [*GPU_ARGS, "--shared-dir", "/fsx", "--scratch-dir", "/scratch"], env)
    assert result.returncode == 0, result.stderr
    lines = (tmp_path / "root/etc/llm-health/health.env").read_text().splitlines()
    # Without floors from the config builder, cluster.health.facts' defaults: never the prolog's 0 (no check).
    assert lines[-4:] == [
        "HEALTH_FSX_PATH=/fsx",
        "HEALTH_MIN_FSX_FREE_GIB=100",
        "HEALTH_SCRATCH_PATH=/scratch",
        "HEALTH_MIN_SCRATCH_FREE_GIB=20",
    ]
    bad = run("gpu_node.sh", [*GPU_ARGS, "--shared-dir", "fsx"], env)
    assert "--shared-dir must be an absolute path, not 'fsx'" in bad.stderr
    floor = run("gpu_node.sh", [*GPU_ARGS, "--min-fsx-free-gib", "-1"], env)
    assert "gpu_node: --min-fsx-free-gib must be a whole number of GiB, not '-1'" in floor.stderr


@pytest.mark.parametrize("script", ["gpu_node.sh", "trn1_node.sh"])
def test_node_bootstraps_write_the_floors_the_config_builder_derives(script: str, tmp_path: Path) -> None:
    """Issue 42, fault 8: the bootstraps wrote the paths but no floors, so the prolog's free-space checks compared
    with 0. Each queue's OnNodeConfigured arguments (the default and trn1 specs) now reach health.env."""
    example = "trn1-neuron.yaml" if script == "trn1_node.sh" else "default.yaml"
    spec = load_spec(next(p for p in ALL_SPECS if p.name == example))
    (queue,) = build_cluster_config(spec, example_refs(spec))["Scheduling"]["SlurmQueues"]
    (action,) = queue["CustomActions"]["OnNodeConfigured"]["Sequence"]
    args: list[str] = action["Args"]
    if script == "trn1_node.sh":
        # The NxDT stack in the AMI (no wheelhouse to fetch), the Neuron pins installed.
        at = args.index("--nxdt-wheelhouse")
        args = args[:at] + args[at + 4 :]
        pins = NEURON_RELEASES[args[args.index("--neuron-sdk") + 1]]
        env = {**fixture_node(tmp_path, efa=8, neuron=16), "INSTALLED_VERSION": installed(tmp_path, pins)}
    else:
        env = {**fixture_node(tmp_path, efa=32, gpus=8), "PYTHON_INSTALL": "false"}
        args[args.index("--python") + 1] = "python3"  # the node's interpreter, whatever this host calls it
    result = run(script, args, env)
    assert result.returncode == 0, result.stderr
    written = (tmp_path / "root/etc/llm-health/health.env").read_text().splitlines()
    settings = dict(line.split("=", 1) for line in written)
    assert settings["HEALTH_MIN_FSX_FREE_GIB"] == args[args.index("--min-fsx-free-gib") + 1] == "106"
    assert settings["HEALTH_MIN_SCRATCH_FREE_GIB"] == args[args.index("--min-scratch-free-gib") + 1] == "20"


def test_gpu_node_requires_the_shared_envs_interpreter(tmp_path: Path) -> None:
    env = {**fixture_node(tmp_path, efa=32, gpus=8), "PYTHON_INSTALL": "false"}
    missing = run("gpu_node.sh", [*GPU_ARGS, "--python", "python3.99"], env)
    assert missing.returncode == 1
    assert "gpu_node: --python python3.99 not found: the shared training env needs it" in missing.stderr
    present = run("gpu_node.sh", [*GPU_ARGS, "--python", "python3"], env)
    assert present.returncode == 0, present.stderr


def trn1_args(offline: str = "true") -> list[str]:
    return [
        "--neuron-sdk",
        "2.26.1",
        "--pins",
        PINS,
        "--devices",
        "16",
        "--efa-devices",
        "8",
        "--compile-cache",
        "/fsx/neuron-cache",
        "--offline",
        offline,
    ]


def installed(tmp_path: Path, versions: dict[str, str]) -> str:
    cases = "".join(f'{name}) echo "{version}" ;;\n' for name, version in versions.items())
    return str(executable(tmp_path / "installed_version", f'case "$1" in\n{cases}esac\n'))


def test_trn1_node_with_the_pins_in_the_ami(tmp_path: Path) -> None:
    env = fixture_node(tmp_path, efa=8, neuron=16)
    # apt versions carry a build suffix after the pinned version
    versions = {**NEURON_RELEASES["2.26.1"], "aws-neuronx-runtime-lib": "2.28.23.0-1a2b3c4d5"}
    env["INSTALLED_VERSION"] = installed(tmp_path, versions)
    result = run("trn1_node.sh", trn1_args(), env)
    assert result.returncode == 0, result.stderr
    root = tmp_path / "root"
    assert (root / "fsx/neuron-cache").is_dir()
    profile = (root / "etc/profile.d/llm-neuron.sh").read_text()
    assert 'export NEURON_COMPILE_CACHE_URL="/fsx/neuron-cache"' in profile
    assert "HEALTH_EXPECTED_NEURON=16" in (root / "etc/llm-health/health.env").read_text()
    # What NxDT's train_setup.sh does as root: the rendezvous port reserved, Lustre's dirty cache capped.
    assert (tmp_path / "tools.log").read_text().splitlines() == [
        "sysctl -w net.ipv4.ip_local_reserved_ports=41000",
        "lctl set_param osc.*.max_dirty_mb=64",
    ]


def test_trn1_node_offline_names_the_wrong_package(tmp_path: Path) -> None:
    env = fixture_node(tmp_path, efa=8, neuron=16)
    env["INSTALLED_VERSION"] = installed(tmp_path, {**NEURON_RELEASES["2.26.1"], "aws-neuronx-dkms": "2.23.9.0"})
    result = run("trn1_node.sh", trn1_args(), env)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "trn1_node: Neuron SDK 2.26.1 not in this AMI: aws-neuronx-dkms 2.23.9.0 (pinned 2.24.7.0); without "
        "internet egress rebuild the AMI from cluster/bootstrap/neuron-image.yaml"
    )


def test_trn1_node_counts_neuron_devices(tmp_path: Path) -> None:
    env = fixture_node(tmp_path, efa=8, neuron=15)
    env["INSTALLED_VERSION"] = installed(tmp_path, NEURON_RELEASES["2.26.1"])
    result = run("trn1_node.sh", trn1_args(), env)
    assert result.returncode == 1
    assert "found 15 Neuron devices" in result.stderr and "expected 16" in result.stderr


def test_neuron_install_refuses_incomplete_pins(tmp_path: Path) -> None:
    env = {**os.environ, "NEURON_PINS": "aws-neuronx-dkms=2.24.7.0"}
    result = run("neuron_install.sh", [], env)
    assert result.returncode == 1
    assert result.stderr.strip() == "neuron_install: no pin for aws-neuronx-runtime-lib in NEURON_PINS"


def make_payload(tmp_path: Path, without: tuple[str, ...] = ()) -> Path:
    source = tmp_path / "payload-src"
    health = source / "cluster" / "health"
    health.mkdir(parents=True)
    for name in ("prolog.sh", "epilog.sh", "lib.sh"):
        (health / name).write_text(f"# {name}\n")
    # The login environment's script, as every payload carries it (cluster/ is one of its packages).
    (source / "cluster" / "bootstrap").mkdir()
    shutil.copy(BOOTSTRAP_DIR / "login_env.sh", source / "cluster" / "bootstrap" / "login_env.sh")
    for package in ("training", "launch", "planner"):  # the trainer, job submission and the planner
        if package not in without:
            (source / package).mkdir()
            (source / package / "__init__.py").write_text("VERSION = 2\n")
    archive = tmp_path / "payload.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for entry in sorted(source.iterdir()):
            tar.add(entry, arcname=entry.name)
    return archive


def test_head_node_installs_checks_training_and_pyxis(tmp_path: Path) -> None:
    slurm_etc, shared = tmp_path / "slurm-etc", tmp_path / "fsx"
    shared.mkdir()
    (shared / "llm-training").mkdir()
    (shared / "llm-training" / "stale.txt").write_text("old release")
    plugin = tmp_path / "spank_pyxis.so"
    plugin.write_bytes(b"\x7fELF")
    profile_d = tmp_path / "profile.d"
    env = {**os.environ, "SLURM_ETC": str(slurm_etc), "PYXIS_PLUGIN": str(plugin), "PROFILE_D": str(profile_d)}
    args = ["--cluster-name-tag", "deployment", "--shared-dir", str(shared), "--payload", str(make_payload(tmp_path))]
    result = run("head_node.sh", [*args, "--pyxis", "true"], env)
    assert result.returncode == 0, result.stderr
    checks = slurm_etc / "scripts" / "llm-health"
    assert sorted(p.name for p in checks.iterdir()) == ["epilog.sh", "lib.sh", "prolog.sh"]
    wrapper = (slurm_etc / "scripts" / "prolog.d" / "90-llm-health.sh").read_text()
    assert f"exec {checks}/prolog.sh" in wrapper
    assert os.access(slurm_etc / "scripts" / "epilog.d" / "90-llm-health.sh", os.X_OK)
    assert (shared / "llm-training" / "training" / "__init__.py").read_text() == "VERSION = 2\n"
    assert not (shared / "llm-training" / "stale.txt").exists()  # swapped in whole
    assert (shared / "llm-training").is_symlink()  # a plain directory from an earlier layout becomes a release
    assert not (shared / "llm-training" / ".venv").exists()  # no --python-env, no env
    assert (
        f'export LLM_TRAINING_SPEC="{shared}/llm-training/deployment.yaml"'
        in (profile_d / "llm-training.sh").read_text()
    )
    assert (slurm_etc / "plugstack.conf.d" / "pyxis.conf").read_text().strip() == (
        f"required {plugin} runtime_path=/run/pyxis"
    )


def test_head_node_makes_the_drain_request_spool_roots_and_sticky_on_every_run(tmp_path: Path) -> None:
    """The epilog trusts requests only in root's sticky spool (cluster/health/epilog.sh): made so even where a
    directory of another mode was there before."""
    shared = tmp_path / "fsx"
    (shared / ".slurm" / "drain-requests").mkdir(parents=True)
    (shared / ".slurm" / "drain-requests").chmod(0o777)
    env = {**os.environ, "SLURM_ETC": str(tmp_path / "slurm-etc"), "PROFILE_D": str(tmp_path / "profile.d")}
    result = run("head_node.sh", ["--shared-dir", str(shared), "--payload", str(make_payload(tmp_path))], env)
    assert result.returncode == 0, result.stderr
    spool = (shared / ".slurm" / "drain-requests").stat()
    assert (spool.st_uid, spool.st_mode & 0o7777) == (0, 0o1733)
    assert ((shared / ".slurm").stat().st_uid, (shared / ".slurm").stat().st_mode & 0o7777) == (0, 0o755)
    assert f"head_node: drain-request spool {shared}/.slurm/drain-requests (root, 1733" in result.stderr


@pytest.mark.parametrize("missing", ["training", "launch", "planner"])
def test_head_node_refuses_an_incomplete_payload(tmp_path: Path, missing: str) -> None:
    env = {**os.environ, "SLURM_ETC": str(tmp_path / "etc")}
    payload = str(make_payload(tmp_path, without=(missing,)))
    result = run("head_node.sh", ["--shared-dir", str(tmp_path), "--payload", payload], env)
    assert result.returncode == 1
    assert result.stderr.strip().endswith(f"head_node: payload {payload} lacks {missing}/")


def fake_python(tmp_path: Path, version: str) -> Path:
    """Stands for an interpreter of another version: answers the bootstrap's version probe."""
    return executable(tmp_path / f"python{version}", f'echo "{version}"\n')


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--python-env", "pypi"], "--python-env must be internet or wheelhouse:<dir or s3://prefix>, not 'pypi'"),
        (
            ["--python-env", "wheelhouse:"],
            "--python-env must be internet or wheelhouse:<dir or s3://prefix>, not 'wheelhouse:'",
        ),
        (["--requirements", "../x.txt"], "--requirements must name a file at the payload's top level, not '../x.txt'"),
        (
            ["--python", "/nonexistent/python3.11"],
            "--python /nonexistent/python3.11 not found on this node: install it in the AMI "
            "(dnf install /nonexistent/python3.11) or pick cluster.python_version",
        ),
        (["--python", "{old}"], "--python {old} is Python 3.9; the training env needs 3.11 or newer"),
        (["--python-env", "wheelhouse:{tmp}/none"], "wheelhouse {tmp}/none not found (build it with make wheelhouse)"),
        (["--python-env", "wheelhouse:{tmp}"], "wheelhouse {tmp} holds no wheels (build it with make wheelhouse)"),
    ],
)
def test_head_node_checks_the_python_env_before_changing_anything(
    tmp_path: Path, args: list[str], message: str
) -> None:
    values = {"old": str(fake_python(tmp_path, "3.9")), "tmp": str(tmp_path)}
    shared, slurm_etc = tmp_path / "fsx", tmp_path / "slurm-etc"
    defaults = {"--python": sys.executable, "--python-env": "internet", "--requirements": "requirements-submit.txt"}
    given = dict(zip(args[::2], (a.format(**values) for a in args[1::2]), strict=True))
    options = [item for pair in {**defaults, **given}.items() for item in pair]
    payload = str(make_payload(tmp_path))
    env = {
        **os.environ,
        "SLURM_ETC": str(slurm_etc),
        "PROFILE_D": str(tmp_path / "profile.d"),
        "PYTHON_INSTALL": "false",
    }
    result = run("head_node.sh", ["--shared-dir", str(shared), "--payload", payload, *options], env)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == "head_node: " + message.format(**values)
    assert not shared.exists() and not slurm_etc.exists()


def test_head_node_python_env_needs_shared_storage_and_a_payload(tmp_path: Path) -> None:
    result = run("head_node.sh", ["--python-env", "internet"], dict(os.environ))
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "head_node: --python-env internet needs --shared-dir and --payload (the env lives beside the training package)"
    )


def test_shipped_neuron_image_config_matches_the_generator(capsys: pytest.CaptureFixture[str]) -> None:
    shipped = yaml.safe_load((BOOTSTRAP_DIR / "neuron-image.yaml").read_text())
    assert shipped == build_image_config(load_spec(TRN1_SPEC))
    assert main([str(TRN1_SPEC), "--parent-image", "ami-0123456789abcdef0"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["Build"]["ParentImage"] == "ami-0123456789abcdef0"
    assert main([str(ALL_SPECS[0])]) == 2
    assert capsys.readouterr().err.strip() == "error: cluster.neuron: None is required to build a Neuron image"


def test_head_node_finds_its_payload_through_the_stable_ssm_key(tmp_path: Path) -> None:
    """OnNodeConfigured names the SSM parameter; its value is the current payload's URI (an `aws` stand-in
    answers `ssm get-parameter` the way the CLI does, with --query Parameter.Value --output text)."""
    payload = make_payload(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "aws-calls"
    executable(bin_dir / "aws", f'echo "$*" >>{calls}\necho {payload}\n')
    shared = tmp_path / "fsx"
    shared.mkdir()
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "SLURM_ETC": str(tmp_path / "etc"),
        "PROFILE_D": str(tmp_path / "profile.d"),
    }
    name = "/llm-demo/cluster/head-node-payload"
    result = run("head_node.sh", ["--shared-dir", str(shared), "--payload-parameter", name], env)
    assert result.returncode == 0, result.stderr
    assert calls.read_text().split() == [
        *("ssm", "get-parameter", "--name", name, "--query", "Parameter.Value", "--output", "text")
    ]
    assert (shared / "llm-training" / "training" / "__init__.py").read_text() == "VERSION = 2\n"
    assert f"payload {payload} (from SSM parameter {name})" in result.stderr

    both = run("head_node.sh", ["--payload", str(payload), "--payload-parameter", name], env)
    assert both.returncode == 1
    assert both.stderr.strip() == "head_node: --payload and --payload-parameter exclude each other"


def test_rendered_component_installs_the_nxdt_stack_from_its_wheelhouse(shellcheck: str, tmp_path: Path) -> None:
    component = tmp_path / "neuron_component.sh"
    component.write_text(render_component(load_spec(TRN1_SPEC), "s3://assets-bucket/nxdt/2.26.1/"))
    result = subprocess.run([shellcheck, str(component)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
    text = component.read_text()
    assert (BOOTSTRAP_DIR / "nxdt_install.sh").read_text() in text
    assert "NXDT_WHEELHOUSE='s3://assets-bucket/nxdt/2.26.1/' NEURON_VENV=\"$NEURON_VENV\" bash" in text
    with pytest.raises(ValueError, match="--nxdt-wheelhouse must be an S3 prefix"):
        render_component(load_spec(TRN1_SPEC), "s3://bucket/x'; rm -rf /")


# ---- the NxDT stack installed for real, offline, from a wheelhouse of stand-in wheels ----------------------

NEMO_FILES = {
    "nemo/__init__.py": "",
    "nemo/collections/nlp/models/nlp_model.py": "models = get_megatron_pretrained_bert_models()\n",
    "nemo/utils/callbacks/nemo_model_checkpoint.py": (
        "if self.save_last and self._fs.exists(ckpt_to_dir(filepath)):\n    pass\n"
    ),
}


def stand_in_wheel(directory: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """A pure-Python wheel named like the real package, so pip's resolution and the script's checks run."""
    dist = re.sub(r"[-_.]+", "_", name)
    info = f"{dist}-{version}.dist-info"
    contents = {
        **files,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in contents.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{info}/RECORD,,")
    wheel = directory / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in contents.items():
            archive.writestr(path, text)
        archive.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return wheel


def range_version(requirement: str) -> tuple[str, str]:
    """A version inside a requirements.txt range: its upper bound, else its lower bound, else 1.0."""
    name, spec = re.match(r"([A-Za-z0-9_.-]+)(.*)", requirement).groups()  # type: ignore[union-attr]
    bounds = dict(re.findall(r"(<=|>=)([0-9][0-9a-z.]*)", spec))
    return name, bounds.get("<=") or bounds.get(">=") or "1.0"


def nxdt_wheelhouse(directory: Path, skip: str | None = None) -> Path:
    """What make nxdt-wheelhouse leaves for 2.26.1, with stand-in wheels: requirements, lock, patches."""
    directory.mkdir()
    lines = nxdt_requirements(load_spec(TRN1_SPEC).cluster.neuron)  # type: ignore[union-attr]
    for line in lines:
        name, version = line.split("==") if "==" in line else range_version(line)
        if name == skip:
            continue
        module = re.sub(r"[-.]+", "_", name).lower()
        files = NEMO_FILES if name == "nemo-toolkit" else {f"{module}/__init__.py": f"VERSION = {version!r}\n"}
        stand_in_wheel(directory, name, version, files)
    (directory / "nxdt-requirements.txt").write_text("".join(f"{line}\n" for line in lines))
    (directory / "nxdt-patches.tsv").write_text(patches_tsv(NXDT_RELEASES["2.26.1"]))
    (directory / "nxdt-constraints.txt").write_text(lock_from_wheels(directory))
    return directory


def test_nxdt_install_from_a_local_wheelhouse_without_an_index(tmp_path: Path) -> None:
    venv = tmp_path / "neuron-venv"
    # pip would reach PyPI if the script let it: any index is a dead address here.
    env = {
        **os.environ,
        "NEURON_VENV": str(venv),
        "NEURON_PYTHON": sys.executable,
        "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
    }
    incomplete = nxdt_wheelhouse(tmp_path / "incomplete", skip="apex")
    result = run("nxdt_install.sh", [], {**env, "NXDT_WHEELHOUSE": str(incomplete)})
    assert result.returncode == 1
    assert "nxdt_install: pip could not install the NxDT stack from" in result.stderr
    assert not (venv / "nxdt-stack.txt").exists()

    wheelhouse = nxdt_wheelhouse(tmp_path / "wheelhouse")
    result = run("nxdt_install.sh", [], {**env, "NXDT_WHEELHOUSE": str(wheelhouse)})
    assert result.returncode == 0, result.stderr
    show = subprocess.run(
        [venv / "bin/python", "-m", "pip", "show", "neuronx-distributed-training", "megatron-core", "apex"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert re.findall(r"^Version: (.*)$", show, re.M) == ["1.6.0", "0.10.0", "0.1"]
    site = next(venv.glob("lib/python3*/site-packages"))
    assert (site / "nemo/collections/nlp/models/nlp_model.py").read_text() == "models = []\n"
    assert (site / "nemo/utils/callbacks/nemo_model_checkpoint.py").read_text().startswith("if self.save_last:")
    assert result.stderr.count("nxdt_install: patched ") == 2
    assert (venv / "nxdt-stack.txt").read_text() == (wheelhouse / "nxdt-requirements.txt").read_text()

    again = run("nxdt_install.sh", [], {**env, "NXDT_WHEELHOUSE": str(wheelhouse)})
    assert again.returncode == 0, again.stderr
    assert again.stderr.count("already patched") == 2


def test_nxdt_install_refuses_a_wheelhouse_that_is_not_one(tmp_path: Path) -> None:
    (tmp_path / "w").mkdir()
    env = {**os.environ, "NXDT_WHEELHOUSE": str(tmp_path / "w"), "NEURON_VENV": str(tmp_path / "venv")}
    result = run("nxdt_install.sh", [], env)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"nxdt_install: wheelhouse {tmp_path}/w has no nxdt-requirements.txt (build it with make nxdt-wheelhouse)"
    )
    assert not (tmp_path / "venv").exists()


def test_trn1_node_checks_the_nxdt_stack_against_the_pins(tmp_path: Path) -> None:
    env = fixture_node(tmp_path, efa=8, neuron=16)
    env["INSTALLED_VERSION"] = installed(tmp_path, NEURON_RELEASES["2.26.1"])
    env["NEURON_VENV"] = "/opt/neuron-venv"
    missing = run("trn1_node.sh", trn1_args(), env)
    assert missing.returncode == 0, missing.stderr
    assert "no NxDT stack in /opt/neuron-venv: Neuron training jobs cannot start here" in missing.stderr

    marker = tmp_path / "root/opt/neuron-venv/nxdt-stack.txt"
    marker.parent.mkdir(parents=True)
    lines = nxdt_requirements(load_spec(TRN1_SPEC).cluster.neuron)  # type: ignore[union-attr]
    marker.write_text("".join(f"{line}\n" for line in lines))
    assert run("trn1_node.sh", trn1_args(), env).returncode == 0
    marker.write_text(marker.read_text().replace("neuronx-cc==2.21.33363.0", "neuronx-cc==2.21.18209.0"))
    clash = run("trn1_node.sh", trn1_args(), env)
    assert clash.returncode == 1
    assert clash.stderr.strip() == (
        "trn1_node: the NxDT stack in /opt/neuron-venv was built for neuronx-cc 2.21.18209.0, the pins say "
        "2.21.33363.0; rebuild it (make nxdt-wheelhouse)"
    )


def test_trn1_node_installs_the_nxdt_stack_from_its_wheelhouse(tmp_path: Path) -> None:
    env = fixture_node(tmp_path, efa=8, neuron=16)
    env["INSTALLED_VERSION"] = installed(tmp_path, NEURON_RELEASES["2.26.1"])
    (tmp_path / "empty").mkdir()
    result = run("trn1_node.sh", [*trn1_args(), "--nxdt-wheelhouse", str(tmp_path / "empty")], env)
    assert result.returncode == 1  # nxdt_install.sh beside trn1_node.sh ran, and refused the empty wheelhouse
    assert "trn1_node: installing the NxDT stack from" in result.stderr
    assert "nxdt_install: wheelhouse" in result.stderr and "has no nxdt-requirements.txt" in result.stderr
    bad = run("trn1_node.sh", [*trn1_args(), "--nxdt-wheelhouse", "relative/dir"], env)
    assert bad.returncode == 1
    assert bad.stderr.strip() == (
        "trn1_node: --nxdt-wheelhouse must be an S3 prefix or an absolute path, not 'relative/dir'"
    )
