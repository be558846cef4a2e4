"""Submitting to SLURM: sbatch with dependencies, the submit environment, time limits, where the spec comes from.
Shared by `python -m launch.submit` and `python -m cluster.fabric`.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

from slurm.errors import SubmitError
from spec import DeploymentSpec
from spec.cli import SPEC_ENV
from spec.cli import load_command_spec as _load_command_spec
from spec.errors import UserError

REPO_ROOT = Path(__file__).resolve().parents[1]
LOCAL_SLURM_CONF = REPO_ROOT / ".local-slurm" / "slurm.conf"
__all__ = ["SPEC_ENV"]  # re-exported for the commands that name it in their --help


def load_command_spec(option: Path | None, error: type[UserError] = SubmitError) -> DeploymentSpec:
    """spec.cli.load_command_spec, raising SubmitError unless told otherwise."""
    return _load_command_spec(option, error)


_TIME_RE = re.compile(r"^(?:(\d+)-)?(\d{1,2}):(\d{2}):(\d{2})$")


def parse_time(text: str) -> int:
    """Seconds in a SLURM time limit written [D-]HH:MM:SS."""
    match = _TIME_RE.match(text)
    if match is None:
        raise SubmitError(f"--time: {text!r} is not [D-]HH:MM:SS")
    days, hours, minutes, seconds = (int(part or 0) for part in match.groups())
    if minutes > 59 or seconds > 59:
        raise SubmitError(f"--time: {text!r} has minutes or seconds above 59")
    total = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    if total < 60:
        raise SubmitError(f"--time: {text!r} is under a minute, SLURM's resolution")
    return total


# sbatch options that set a job's GPUs: the rendered scripts already ask for every GPU of their nodes, and Slurm
# refuses a typed --gres=gpu:<type>:N next to the script's untyped --gpus-per-node ("with and without type").
GPU_OPTIONS: tuple[str, ...] = ("--gpus", "--gres", "--gpus-per-node", "--gpus-per-task", "--gpus-per-socket")


def check_sbatch_args(extras: Sequence[str]) -> None:
    """--sbatch-arg values: options, one line each, none that changes the GPU request."""
    for extra in extras:
        if not extra.startswith("-") or "\n" in extra:
            raise SubmitError(f"--sbatch-arg: {extra!r} is not an sbatch option (write --sbatch-arg=--account=NAME)")
        name = extra.split("=", 1)[0]
        if name in GPU_OPTIONS or (name.startswith("-G") and not name.startswith("--")):
            raise SubmitError(
                f"--sbatch-arg: {extra!r}: the script already requests every GPU of its nodes "
                "(#SBATCH --gpus-per-node, whole nodes); leave GPU options out"
            )


def sbatch(script: Path, dependency: str | None, env: dict[str, str], extra: list[str] | None = None) -> str:
    command = ["sbatch", "--parsable", *(extra or [])]
    if dependency:
        # A failed dependency would otherwise leave the job pending forever (DependencyNeverSatisfied).
        command += [f"--dependency=afterok:{dependency}", "--kill-on-invalid-dep=yes"]
    command.append(str(script))
    try:
        result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60, check=False)
    except FileNotFoundError:
        raise SubmitError(
            "sbatch: not found; run this on the cluster's head node (or start the local cluster)"
        ) from None
    if result.returncode != 0:
        message = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:] or ["no output"]
        raise SubmitError(f"sbatch {script.name}: {message[0]}")
    return result.stdout.strip().split(";")[0]


def submit_env(local: bool) -> dict[str, str]:
    env = dict(os.environ)
    if local and "SLURM_CONF" not in env and LOCAL_SLURM_CONF.exists():
        env["SLURM_CONF"] = str(LOCAL_SLURM_CONF)
    return env
