"""Where a doc block runs: a scratch copy of the repo (the venvs and node_modules linked in) and, for blocks that
need AWS or the cluster, shims on PATH that check each call with the real program's parser (shim.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from cluster.payload import PACKAGES
from tests.env_cache import CACHE_VARIABLE, OFF, cache_root
from tests.runbook.blocks import REPO, Block
from tests.runbook.shim import SLURM_TOOLS

LINKED = (".venv", "node_modules", ".pcluster-venv", ".awscli-venv", "build/wheelhouse-test")
# Programs a head-node block may call that the test does not run: the ParallelCluster AMI's Amazon Linux 2023 base
# system, and tensorboard from the release's env (requirements-node.txt pins it).
HEAD_NODE_PROGRAMS = (
    "sudo",
    "su",
    "tail",
    "tee",
    "mkdir",
    "cp",
    "grep",
    "cat",
    "cut",
    "head",
    "ls",
    "bash",
    "sh",
    "echo",
    "tensorboard",
)
# Our offline commands that `aws` blocks run for real (the rest stop at their argument parser).
OFFLINE_MODULES = (
    "spec.phase_two",
    "policies.guardrails",
    "cluster.image_config",
    "cluster.config_builder",
    "cluster.update_plan",
)
SLURM_CONF = """\
ClusterName=runbook
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={port}
AuthType=auth/none
CredType=cred/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort={port}
MessageTimeout=2
PriorityType=priority/multifactor
NodeName=gpu-dy-p5-48xlarge-[1-2] NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN
PartitionName=gpu Nodes=ALL Default=YES
"""
UNREACHABLE_PORT = 9  # discard: nothing listens there


def scratch_repo(dest: Path) -> Path:
    """The repo's files (tracked and new, not ignored) with their mtimes, so make sees built venvs as current."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file() and not source.is_symlink():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    for name in LINKED:
        if (REPO / name).exists():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            (dest / name).symlink_to((REPO / name).resolve())
    return dest


def launchers() -> dict[str, str]:
    """The head node's commands: pyproject.toml's entry points, which head_node.sh lays out as the release's bin/
    (tests/cluster/test_head_node_env.py runs the bootstrap and compares)."""
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]


def _shims(directory: Path, names: list[str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        path = directory / name
        path.write_text(f'#!/bin/sh\nexec {sys.executable} {REPO / "tests" / "runbook" / "shim.py"} {name} "$@"\n')
        path.chmod(0o755)
    return directory


def _aws_profiles(root: Path) -> dict[str, str]:
    config, credentials = root / "aws-config", root / "aws-credentials"
    config.write_text(
        "".join(f"[profile {p}]\nregion = us-east-1\n" for p in ("compute", "data", "management", "operator"))
        + "[default]\nregion = us-east-1\n"
    )
    credentials.write_text(
        "".join(
            f"[{p}]\naws_access_key_id = runbook-fake-key\naws_secret_access_key = runbook-fake-secret\n"
            for p in ("default", "compute", "data", "management", "operator")
        )
    )
    return {
        "AWS_CONFIG_FILE": str(config),
        "AWS_SHARED_CREDENTIALS_FILE": str(credentials),
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{UNREACHABLE_PORT}",
        "AWS_MAX_ATTEMPTS": "1",
        "AWS_RETRY_MODE": "standard",
        "AWS_EC2_METADATA_DISABLED": "true",
    }


def _base_env(root: Path, repo: Path, log: Path) -> dict[str, str]:
    home = root / "home"
    home.mkdir(exist_ok=True)
    slurm_conf = root / "slurm.conf"
    slurm_conf.write_text(SLURM_CONF.format(port=UNREACHABLE_PORT))
    assemblies = root / "assemblies"
    assemblies.mkdir(exist_ok=True)
    return {
        "HOME": str(home),
        "USER": os.environ.get("USER", "root"),
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(repo),
        "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1",
        "RUNBOOK_LOG": str(log),
        "RUNBOOK_AWS": str(repo / ".awscli-venv" / "bin" / "aws"),
        "RUNBOOK_CDK": str(repo / "node_modules" / ".bin" / "cdk"),
        "RUNBOOK_PCLUSTER_PYTHON": str(repo / ".pcluster-venv" / "bin" / "python"),
        "RUNBOOK_PYTHON": str(repo / ".venv" / "bin" / "python"),
        "RUNBOOK_SLURM_CONF": str(slurm_conf),
        "RUNBOOK_ASSEMBLIES": str(assemblies),
        # The reader's HOME is a scratch one, but their `make` links the environments this machine built (the
        # scratch checkout's copied pin files are newer than the links' markers): the same cache, not a new one.
        CACHE_VARIABLE: str(cache_root(dict(os.environ)) or OFF),
        **_aws_profiles(root),
    }


def prepare(root: Path) -> tuple[Path, dict[str, str]]:
    """The scratch checkout every block of one doc shares, in order, as a reader following it would."""
    repo = scratch_repo(root / "repo")
    # A reader arrives from README.md with their spec (`cp spec/default.yaml my-deployment.yaml`).
    shutil.copy(repo / "spec" / "default.yaml", repo / "my-deployment.yaml")
    env = _base_env(root, repo, root / "calls.jsonl")
    return repo, env


def env_for(block: Block, root: Path, repo: Path, base: dict[str, str]) -> dict[str, str]:
    env = dict(base)
    if block.tag == "here" and not block.long:
        # A developer's shell in a checkout after `make` built the venvs. README's reader starts it fresh, the venv
        # not active (README says to activate it); the other docs' readers come from README with it active.
        env.pop("PYTHONPATH")
        system = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        active = block.path.name != "README.md"
        env["PATH"] = f"{repo / '.venv' / 'bin'}:{system}" if active else system
    elif block.tag == "here":
        # make -n, pytest --collect-only and our commands' parsers (`.venv/bin/python` is read as `python`).
        env["PATH"] = f"{_shims(root / 'long-shims', ['make', 'python', 'python3'])}:/usr/local/bin:/usr/bin:/bin"
    elif block.tag == "aws":
        # A workstation with the AWS CLI and credentials: the real tools, AWS-facing ones through shims.
        names = ["aws", "npx", "pcluster", "make", "python", "python3", *SLURM_TOOLS]
        env["PATH"] = f"{_shims(root / 'aws-shims', names)}:/usr/bin:/bin"
        env["RUNBOOK_RUN_MODULES"] = " ".join(OFFLINE_MODULES)
    else:
        home = _head_node_home(root, repo)
        env.update(
            PATH=str(home / "bin"),
            LLM_TRAINING_HOME=str(home),
            LLM_TRAINING_SPEC=str(home / "deployment.yaml"),
            RUNBOOK_LAUNCHERS=json.dumps(launchers()),
            RUNBOOK_PRESENT=" ".join(HEAD_NODE_PROGRAMS),
            RUNBOOK_INSTANCE_ROLE="1",  # the AWS CLI's credentials come from the node's role (instance metadata)
        )
    return env


def _head_node_home(root: Path, repo: Path) -> Path:
    """The head node's login shell as head_node.sh leaves it (LLM_TRAINING_HOME, LLM_TRAINING_SPEC, the release's
    bin/ on PATH) with every program a shim: nothing else is on PATH."""
    home = root / "fsx" / "llm-training"
    if not home.exists():
        home.mkdir(parents=True)
        for part in (*PACKAGES, "pyproject.toml"):  # what the payload carries (cluster/payload.py)
            (home / part).symlink_to(repo / part)
        shutil.copy(repo / "spec" / "default.yaml", home / "deployment.yaml")
        _shims(home / "bin", [*launchers(), "aws", *SLURM_TOOLS, *HEAD_NODE_PROGRAMS])
        _shims(home / ".venv" / "bin", ["python", "python3"])
    return home


def run_block(
    block: Block, repo: Path, env: dict[str, str], timeout_s: float = 1800
) -> subprocess.CompletedProcess[str]:
    script = block.script()
    if block.long:
        script = script.replace(".venv/bin/python", "python")
    return subprocess.run(
        ["/bin/bash", "-euo", "pipefail", "-c", script],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        stdin=subprocess.DEVNULL,
    )


def calls(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
