"""Mirror the NxDT stack of the spec's Neuron SDK into a wheelhouse the trn1 nodes install from offline.

Run once per Neuron release, on a machine with internet access and the nodes' OS, CPU architecture and
Python (sdist-only dependencies and megatron-core's C++ helpers are built into wheels here, so nodes
install wheels only), then upload:

    make nxdt-wheelhouse SPEC=spec/examples/trn1-neuron.yaml            # -> build/nxdt-wheelhouse
    aws s3 sync build/nxdt-wheelhouse s3://BUCKET/nxdt/2.26.1/

cluster/bootstrap/nxdt_install.sh installs it with `pip install --no-index --find-links`. Never run by
the tests (it downloads several GB); they exercise the rendered commands and files.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from spec.artifacts import NXDT_EXAMPLES
from spec.cli import OneLineParser, user_errors
from spec.errors import UserError
from spec.load import load_spec
from spec.platform.neuron import NXDT_SOURCE_COMMIT, NxdtStack, SourceBuild, nxdt_requirements, nxdt_stack

NEURON_PIP_INDEX = "https://pip.repos.neuron.amazonaws.com"
NXDT_REPOSITORY = "https://github.com/aws-neuron/neuronx-distributed-training.git"
REQUIREMENTS = "nxdt-requirements.txt"
CONSTRAINTS = "nxdt-constraints.txt"
PATCHES = "nxdt-patches.tsv"

# NxDT's README replaces apex's setup.py with this one: the Python sources only, no CUDA extension.
SLIM_APEX_SETUP = """\
from setuptools import find_packages, setup

setup(
    name="apex",
    version="{version}",
    packages=find_packages(exclude=("build", "csrc", "include", "tests", "dist", "docs", "examples")),
    install_requires=["packaging>20.6"],
    description="PyTorch Extensions written by NVIDIA (slim: no CUDA extensions, for Neuron)",
)
"""


def source_build_commands(build: SourceBuild, workdir: Path, out: Path, python: str) -> list[list[str]]:
    """Clone the tag and build one wheel of it (no dependencies: the requirements bring those)."""
    checkout = workdir / build.name
    commands = [["git", "clone", "--quiet", "--depth", "1", "--branch", build.ref, build.repository, str(checkout)]]
    commands.append(
        [python, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(out), str(checkout)]
    )
    return commands


def download_command(requirements: Path, out: Path, python: str) -> list[str]:
    """Wheels of everything else (built here where only an sdist exists), from Neuron's index and PyPI."""
    return [
        python,
        "-m",
        "pip",
        "wheel",
        "--quiet",
        "--extra-index-url",
        NEURON_PIP_INDEX,
        "--find-links",
        str(out),
        "-r",
        str(requirements),
        "-w",
        str(out),
    ]


def examples_commands(workdir: Path, out: Path) -> list[list[str]]:
    """NxDT's examples/ (the launcher the jobs run; not in its wheel) at the recorded commit, as a tarball the head
    node unpacks onto /fsx (docs/jobs.md)."""
    checkout = workdir / "neuronx-distributed-training"
    return [
        ["git", "clone", "--quiet", NXDT_REPOSITORY, str(checkout)],
        ["git", "-C", str(checkout), "checkout", "--quiet", NXDT_SOURCE_COMMIT],
        ["tar", "-czf", str(out / NXDT_EXAMPLES), "-C", str(checkout), "examples"],
    ]


def patches_tsv(stack: NxdtStack) -> str:
    lines = ["# path\tpattern\treplacement (fixed strings; NxDT install_setup.sh's sed edits of NeMo)"]
    for patch in stack.nemo_patches:
        if "\t" in patch.pattern + patch.replacement + patch.path:
            raise ValueError(f"NeMo patch of {patch.path} has a tab")
        lines.append(f"{patch.path}\t{patch.pattern}\t{patch.replacement}")
    return "\n".join(lines) + "\n"


_WHEEL_NAME = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)-")


def lock_from_wheels(out: Path) -> str:
    """name==version of every wheel in the wheelhouse: what the nodes may install, and nothing else."""
    pins: dict[str, str] = {}
    for wheel in sorted(out.glob("*.whl")):
        match = _WHEEL_NAME.match(wheel.name)
        if match is None:
            raise ValueError(f"{wheel.name} is not a wheel file name")
        name = re.sub(r"[-_.]+", "-", match["name"]).lower()
        if pins.setdefault(name, match["version"]) != match["version"]:
            raise ValueError(f"the wheelhouse holds two versions of {name}: {pins[name]} and {match['version']}")
    return "".join(f"{name}=={version}\n" for name, version in sorted(pins.items()))


def build(spec_path: str, out: Path, python: str) -> None:
    spec = load_spec(spec_path)
    if spec.cluster is None or spec.cluster.neuron is None:
        raise ValueError(f"cluster.neuron: None in {spec_path}; the NxDT stack needs a Neuron SDK")
    neuron = spec.cluster.neuron
    stack = nxdt_stack(neuron)
    out.mkdir(parents=True, exist_ok=True)
    workdir = out.parent / f"{out.name}.src"
    workdir.mkdir(parents=True, exist_ok=True)
    for source in stack.source_builds:
        commands = source_build_commands(source, workdir, out, python)
        subprocess.run(commands[0], check=True)
        if source.slim_setup:
            (workdir / source.name / "setup.py").write_text(SLIM_APEX_SETUP.format(version=source.version))
        subprocess.run(commands[1], check=True)
    built = {source.name for source in stack.source_builds}
    requirements = nxdt_requirements(neuron)
    index_requirements = out / "index-requirements.txt"
    index_requirements.write_text(
        "".join(f"{line}\n" for line in requirements if re.split(r"[=<>!~ ]", line, maxsplit=1)[0] not in built)
    )
    subprocess.run(download_command(index_requirements, out, python), check=True)
    index_requirements.unlink()
    for command in examples_commands(workdir, out):
        subprocess.run(command, check=True)
    (out / REQUIREMENTS).write_text("".join(f"{line}\n" for line in requirements))
    (out / PATCHES).write_text(patches_tsv(stack))
    (out / CONSTRAINTS).write_text(lock_from_wheels(out))


@user_errors
def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description="Build the NxDT wheelhouse of the spec's Neuron SDK.")
    parser.add_argument("spec", help="a spec with a cluster.neuron section")
    parser.add_argument("--out", type=Path, default=Path("build/nxdt-wheelhouse"))
    parser.add_argument("--python", default=sys.executable, help="the nodes' Python version's interpreter")
    args = parser.parse_args(argv)
    try:
        build(args.spec, args.out, args.python)
    except (KeyError, ValueError) as error:
        raise UserError(error.args[0] if isinstance(error, KeyError) else str(error)) from None
    return 0


if __name__ == "__main__":
    sys.exit(main())
