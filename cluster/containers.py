"""The NeMo image's way into a VPC without internet: build it FROM NVIDIA's NeMo Framework container (the spec's
cluster.containers.nemo_framework: 26.08 with Megatron Bridge by default, or 25.07 with NeMo 2.4) with EFA added
(containers/nemo-efa), push it to the compute account's ECR, and import it once to a .sqsh on the shared file
system that pyxis runs on every node (docs/containers.md).

    python -m cluster.containers push   [--spec SPEC] [--profile P] [--dry-run]   # where docker and the account's credentials are
    python -m cluster.containers import [--spec SPEC] [--dry-run]   # on the head node: one GPU node imports it

`make nemo-image SPEC=... PROFILE=...` runs `push`. Each step prints the commands it runs; --dry-run prints only.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from slurm.submission import load_command_spec
from spec import DeploymentSpec
from spec.cli import OneLineParser, user_errors
from spec.cli_types import profile_name
from spec.containers import EcrImage
from spec.errors import UserError

REPO_ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE_DIR = REPO_ROOT / "containers" / "nemo-efa"


def ecr_image(spec: DeploymentSpec) -> EcrImage:
    if spec.cluster is None:
        raise SystemExit("error: --spec: the spec has no cluster section")
    return spec.cluster.containers.ecr_image(spec.accounts.compute, spec.region)


def push_commands(spec: DeploymentSpec, profile: str | None = None) -> list[list[str]]:
    """Build for x86_64 nodes, make sure the repository exists (scanned, immutable tags), log in, push; the ECR calls
    with `profile` (the compute account's AWS CLI profile) when given, else the environment's credentials."""
    image = ecr_image(spec)
    assert spec.cluster is not None
    framework = spec.cluster.containers.framework
    region = ["--region", image.region, *(["--profile", profile] if profile else [])]
    build_args = ["--build-arg", f"NEMO_IMAGE={framework.base_image}"]
    build_args += ["--build-arg", f"FRAMEWORK_MODULE={framework.check_import}"]
    return [
        ["docker", "build", "--platform", "linux/amd64", "--tag", image.reference, *build_args, str(DOCKERFILE_DIR)],
        [
            "bash",
            "-c",
            f"aws ecr describe-repositories --repository-names {shlex.quote(image.repository)} {shlex.join(region)} "
            f">/dev/null 2>&1 || aws ecr create-repository --repository-name {shlex.quote(image.repository)} "
            f"--image-tag-mutability IMMUTABLE --image-scanning-configuration scanOnPush=true {shlex.join(region)}",
        ],
        [
            "bash",
            "-c",
            f"aws ecr get-login-password {shlex.join(region)} | "
            f"docker login --username AWS --password-stdin {shlex.quote(image.registry)}",
        ],
        ["docker", "push", image.reference],
    ]


IMPORT_SCRIPT = """set -euo pipefail
# One GPU node pulls the image with its role's ECR token and writes the squashfs next to its final name.
config="$(mktemp -d)"
trap 'rm -rf "$config" "$OUTPUT.partial"' EXIT
echo "machine $REGISTRY login AWS password $(aws ecr get-login-password --region "$REGION")" >"$config/.credentials"
chmod 0600 "$config/.credentials"
mkdir -p "$(dirname "$OUTPUT")"
ENROOT_CONFIG_PATH="$config" enroot import --output "$OUTPUT.partial" "$SOURCE"
chmod 0644 "$OUTPUT.partial"
mv -f "$OUTPUT.partial" "$OUTPUT"
echo "imported $SOURCE to $OUTPUT"
"""


def import_environment(spec: DeploymentSpec) -> dict[str, str]:
    image = ecr_image(spec)
    assert spec.cluster is not None
    return {
        "REGISTRY": image.registry,
        "REGION": image.region,
        "SOURCE": image.enroot_uri,
        "OUTPUT": spec.cluster.containers.nemo_image,
    }


def import_command(spec: DeploymentSpec, partition: str) -> list[str]:
    """srun on one GPU node (enroot is there, and the node role may pull from the repository)."""
    assert spec.cluster is not None
    if not spec.cluster.containers.nemo_image.endswith(".sqsh"):
        raise SystemExit("error: cluster.containers.nemo_image is the ECR image itself: nothing to import")
    exports = ",".join(f"{name}={value}" for name, value in import_environment(spec).items())
    return ["srun", f"--partition={partition}", "--nodes=1", "--ntasks=1", f"--export=ALL,{exports}",
            "bash", "-c", IMPORT_SCRIPT]  # fmt: skip


def _gpu_partition(spec: DeploymentSpec) -> str:
    from spec.platform.instances import instance_facts

    assert spec.cluster is not None
    for queue in spec.cluster.queues:
        if instance_facts(queue.instance_type).accelerator == "gpu":
            return queue.name
    raise SystemExit("error: --spec: no GPU queue to import the image on")


@user_errors
def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m cluster.containers", description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("push", "import"))
    parser.add_argument(
        "--spec",
        type=Path,
        help="deployment spec (default: $LLM_TRAINING_SPEC, set on the head node, else spec/default.yaml)",
    )
    parser.add_argument(
        "--profile", type=profile_name, help="push: the compute account's AWS CLI profile (default: the environment's)"
    )
    parser.add_argument("--partition", help="import: the GPU partition (default: the spec's first GPU queue)")
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    args = parser.parse_args(argv)
    spec = load_command_spec(args.spec, UserError)
    if args.step == "push":
        commands = push_commands(spec, args.profile)
    else:
        commands = [import_command(spec, args.partition or _gpu_partition(spec))]
    for command in commands:
        print("+ " + shlex.join(command), file=sys.stderr)
        if not args.dry_run:
            subprocess.run(command, check=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
