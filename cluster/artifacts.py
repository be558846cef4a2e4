"""Build the nodes' offline artifacts and upload them where the cluster config tells the nodes to read them.

    make upload-artifacts SPEC=my-deployment.yaml PROFILE=compute
    python -m cluster.artifacts SPEC.yaml [--profile compute] [--build-dir build] [--no-build] [--dry-run]

After the artifacts stack (it creates the bucket) and before the cluster stack (its head node installs from it):
the wheelhouse of requirements-node.txt for the nodes' Python (`make wheelhouse`), the exporters' pinned binaries
(`make observability-binaries`), with GPU queues the pinned nccl-tests source the fabric check is built from
(`make nccl-tests-source`, docs/fabric-checks.md) and, with Trainium queues, the NxDT stack (`make
nxdt-wheelhouse`: build it on a machine of the nodes' OS and Python, then pass --no-build), each synced with
`aws s3 sync` to its folder from spec.artifacts, the function the cluster config hands the nodes their folders
with. Several GB; needs internet and credentials that may write to the compute account's bucket. A re-upload only adds and replaces (no --delete):
nodes still booting keep finding what they were told to read.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from spec import DEFAULT_SPEC_PATH, DeploymentSpec, SpecError, load_spec
from spec.artifacts import OBSERVABILITY_FOLDER, S3Folder, artifact_locations
from spec.cli import OneLineParser, user_errors
from spec.cli_types import output_directory, profile_name
from spec.errors import UserError

REPO_ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Upload:
    what: str
    source: Path  # the built directory
    destination: S3Folder
    build: tuple[str, ...]  # the make target and variables that build `source`
    pattern: str  # what the built directory must hold ...
    holds: str  # ... in words
    exclude: tuple[str, ...] = ()  # keys the sync leaves to another upload

    def check(self, no_build: bool) -> None:
        if any(self.source.glob(self.pattern)):
            return
        how = shlex.join(["make", *(part for part in self.build if "_DIR=" not in part)])
        raise UserError(
            f"{self.what}: {self.source} holds no {self.holds} ({how}{', or drop --no-build' if no_build else ''})"
        )


def upload_plan(spec: DeploymentSpec, build_dir: Path, spec_path: Path = DEFAULT_SPEC_PATH) -> list[Upload]:
    """What to build and where each build goes; empty when the spec's nodes read nothing from S3."""
    if spec.cluster is None:
        return []
    locations = artifact_locations(spec)
    plan: list[Upload] = []
    if locations.python_wheelhouse is not None:
        wheelhouse = build_dir / "wheelhouse"
        observability = wheelhouse / OBSERVABILITY_FOLDER.rstrip("/")
        plan += [
            Upload(
                "wheelhouse",
                wheelhouse,
                locations.python_wheelhouse,
                ("wheelhouse", f"WHEELHOUSE_PYTHON={spec.cluster.python_version}", f"WHEELHOUSE_DIR={wheelhouse}"),
                "*.whl",
                "wheels",
                exclude=(f"{OBSERVABILITY_FOLDER}*",),
            ),
            Upload(
                "observability binaries",
                observability,
                locations.python_wheelhouse.child(OBSERVABILITY_FOLDER),
                ("observability-binaries", f"OBSERVABILITY_DIR={observability}"),
                "*",
                "binaries",
            ),
        ]
    if locations.nccl_tests is not None:
        source = build_dir / "nccl-tests"
        plan.append(
            Upload(
                "nccl-tests source",
                source,
                locations.nccl_tests,
                ("nccl-tests-source", f"NCCL_TESTS_SOURCE_DIR={source}"),
                "nccl-tests-*.tar.gz",
                "nccl-tests source tarball",
            )
        )
    if locations.nxdt_wheelhouse is not None:
        nxdt = build_dir / "nxdt-wheelhouse"
        plan.append(
            Upload(
                "NxDT wheelhouse",
                nxdt,
                locations.nxdt_wheelhouse,
                ("nxdt-wheelhouse", f"SPEC={spec_path}", f"NXDT_WHEELHOUSE_DIR={nxdt}"),
                "nxdt-requirements.txt",
                "nxdt-requirements.txt",
            )
        )
    return plan


def sync_command(spec: DeploymentSpec, upload: Upload, profile: str | None) -> list[str]:
    command = ["aws", "s3", "sync", str(upload.source), upload.destination.uri, "--only-show-errors"]
    for pattern in upload.exclude:
        command += ["--exclude", pattern]
    command += ["--region", spec.region]
    return command + (["--profile", profile] if profile else [])


def _run(command: list[str], dry_run: bool) -> None:
    print("+ " + shlex.join(command), file=sys.stderr)
    if not dry_run:
        subprocess.run(command, check=True)


@user_errors
def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="llm-upload-artifacts", description=__doc__.splitlines()[0])
    parser.add_argument("spec", nargs="?", type=Path, help="deployment spec (default: the embedded default spec)")
    parser.add_argument(
        "--profile", type=profile_name, help="AWS CLI profile of the compute account (default: the environment's)"
    )
    parser.add_argument(
        "--build-dir", type=output_directory, default=REPO_ROOT / "build", help="where the builds go (build/)"
    )
    parser.add_argument("--no-build", action="store_true", help="upload what --build-dir already holds")
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    args = parser.parse_args(argv)
    spec_path = (args.spec or DEFAULT_SPEC_PATH).resolve()
    try:
        spec = load_spec(spec_path)
    except SpecError as error:
        raise UserError(f"spec: {str(error).splitlines()[0]}") from None
    if spec.cluster is None:
        raise UserError(f"cluster: None in {spec_path}: no cluster, so no nodes to upload artifacts for")
    build_dir = args.build_dir.resolve()
    plan = upload_plan(spec, build_dir, spec_path)
    if not plan:
        print(
            "nothing to upload: cluster.python_wheelhouse is unset and network.internet_egress is "
            f"{spec.network.internet_egress!r} (the head node installs from PyPI), and no GPU or Trainium queue",
            file=sys.stderr,
        )
        return 0
    if not args.no_build:
        for upload in plan:
            _run(["make", "-C", str(REPO_ROOT), *upload.build], args.dry_run)
    if not args.dry_run:
        for upload in plan:
            upload.check(args.no_build)
    for upload in plan:
        _run(sync_command(spec, upload, args.profile), args.dry_run)
        print(f"{upload.what}: {upload.destination.uri}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
