"""The head node's payload: the trainer, job submission, the planner, the spec and the node checks, as one tarball.

Built at synth time into build/, deterministically (sorted entries, fixed owner and mtime, no
__pycache__), so the CDK asset hash changes only when the content does. The head-node bootstrap
(cluster/bootstrap/head_node.sh) unpacks it onto shared storage.
"""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

import yaml

from cluster.accounting import sacctmgr_script
from cluster.users import accounts_script
from spec import DeploymentSpec

REPO = Path(__file__).resolve().parents[1]
# Python packages the head node and the jobs import, and the files beside them.
PACKAGES: tuple[str, ...] = ("training", "launch", "planner", "slurm", "spec", "cluster", "policies")
TOP_LEVEL_FILES: tuple[str, ...] = (
    "pyproject.toml",  # the entry points the head node puts on PATH
    "requirements.txt",
    "constraints.txt",
    "requirements-node.txt",
    "requirements-submit.txt",
)
EXCLUDED_PARTS = {"__pycache__", ".pytest_cache", "tests"}
EXCLUDED_SUFFIXES = {".pyc", ".pyo"}
FIXED_MTIME = 0
ACCOUNTING_SCRIPT = "accounting/sacctmgr.sh"
USERS_SCRIPT = "users/accounts.sh"


def _members(root: Path) -> list[Path]:
    files: list[Path] = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*")):
            relative = path.relative_to(root)
            if path.is_file() and not (set(relative.parts) & EXCLUDED_PARTS) and path.suffix not in EXCLUDED_SUFFIXES:
                files.append(relative)
    files += [Path(name) for name in TOP_LEVEL_FILES if (root / name).is_file()]
    return files


def _add(archive: tarfile.TarFile, name: str, data: bytes, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = FIXED_MTIME
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    archive.addfile(info, io.BytesIO(data))


def deployment_yaml(spec: DeploymentSpec) -> str:
    """The deployment spec as the payload carries it (deployment.yaml)."""
    return yaml.safe_dump(spec.model_dump(mode="json", exclude_none=True), sort_keys=False)


def build_payload(spec: DeploymentSpec, spec_yaml: str, out_dir: Path, root: Path = REPO) -> Path:
    """Write `<out_dir>/head_node_payload.tar.gz` and return its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for relative in _members(root):
            path = root / relative
            _add(archive, relative.as_posix(), path.read_bytes(), 0o755 if path.stat().st_mode & 0o111 else 0o644)
        # The deployment spec the cluster was built from: the submit command reads it on the head node.
        _add(archive, "deployment.yaml", spec_yaml.encode(), 0o644)
        if spec.cluster is not None and spec.cluster.accounting.enabled:
            # Run by head_node.sh once slurmdbd answers: the spec's QoS, accounts and users (cluster.accounting).
            _add(archive, ACCOUNTING_SCRIPT, sacctmgr_script(spec.cluster.accounting).encode(), 0o755)
        if spec.cluster is not None and spec.cluster.users:
            # Run by head_node.sh and, from the release on shared storage, by every compute node: cluster.users.
            _add(archive, USERS_SCRIPT, accounts_script(spec.cluster.users, spec.cluster.groups).encode(), 0o755)
    target = out_dir / "head_node_payload.tar.gz"
    # gzip with mtime 0 keeps the bytes (and so the asset hash) stable across builds.
    compressed = gzip.compress(buffer.getvalue(), compresslevel=6, mtime=FIXED_MTIME)
    if not target.exists() or target.read_bytes() != compressed:
        target.write_bytes(compressed)
    return target
