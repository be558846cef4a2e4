"""`make upload-artifacts` (cluster.artifacts) run for real with `make` and `aws` replaced by argv recorders on PATH:
it builds what the spec's nodes need and syncs each build to exactly the S3 folder the cluster config hands the
nodes (spec.artifacts is the one function both call)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cluster.artifacts import upload_plan
from cluster.config_builder import build_cluster_config, example_refs
from spec import DEFAULT_SPEC_PATH, DeploymentSpec, load_spec, parse_spec
from tests.cluster.conftest import spec_dict

REPO = Path(__file__).resolve().parents[2]
TRN1 = REPO / "spec" / "examples" / "trn1-neuron.yaml"
RECORDER = f"""#!{sys.executable}
import json, os, sys
with open(os.environ["ARGV_LOG"], "a") as log:
    log.write(json.dumps([os.path.basename(sys.argv[0]), *sys.argv[1:]]) + "\\n")
"""


NCCL_TESTS = "s3://llm-demo-artifacts-111111111111/nccl-tests/"


def built(build: Path, nxdt: bool = False) -> Path:
    """What make wheelhouse, make observability-binaries, make nccl-tests-source and make nxdt-wheelhouse leave
    behind, in miniature."""
    (build / "wheelhouse" / "observability").mkdir(parents=True)
    (build / "wheelhouse" / "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"wheel")
    (build / "wheelhouse" / "observability" / "node_exporter-1.8.2.linux-amd64.tar.gz").write_bytes(b"tgz")
    (build / "nccl-tests").mkdir()
    (build / "nccl-tests" / "nccl-tests-2.17.6.tar.gz").write_bytes(b"tgz")
    if nxdt:
        (build / "nxdt-wheelhouse").mkdir()
        (build / "nxdt-wheelhouse" / "nxdt-requirements.txt").write_text("neuronx-distributed-training==1.6.0\n")
    return build


def upload(tmp_path: Path, spec_path: Path, *options: str) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
    tools = tmp_path / "bin"
    tools.mkdir(exist_ok=True)
    for name in ("aws", "make"):
        (tools / name).write_text(RECORDER)
        (tools / name).chmod(0o755)
    log = tmp_path / "argv.log"
    log.unlink(missing_ok=True)
    env = {**os.environ, "PATH": f"{tools}:/usr/bin:/bin", "ARGV_LOG": str(log), "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-m", "cluster.artifacts", str(spec_path), *options],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return result, calls


def synced(calls: list[list[str]]) -> dict[str, list[str]]:
    """Destination -> the `aws s3 sync` call that uploads there."""
    syncs = [call for call in calls if call[:3] == ["aws", "s3", "sync"]]
    return {next(a for a in call[3:] if a.startswith("s3://")): call for call in syncs}


def handed_to_nodes(spec: DeploymentSpec) -> dict[str, str]:
    """The artifact folders the cluster config hands the nodes: the head node's wheelhouse (and, by head_node.sh's
    convention, its observability/ folder) and each Trainium queue's NxDT wheelhouse."""
    config: dict[str, Any] = build_cluster_config(spec, example_refs(spec))
    found: dict[str, str] = {}
    head = config["HeadNode"]["CustomActions"]["OnNodeConfigured"]["Sequence"][0]["Args"]
    python_env = head[head.index("--python-env") + 1]
    if python_env.startswith("wheelhouse:"):
        found["wheelhouse"] = python_env.removeprefix("wheelhouse:")
        found["observability"] = found["wheelhouse"].rstrip("/") + "/observability/"
    for queue in config["Scheduling"]["SlurmQueues"]:
        args = queue["CustomActions"]["OnNodeConfigured"]["Sequence"][0]["Args"]
        if "--nxdt-wheelhouse" in args:
            found["nxdt"] = args[args.index("--nxdt-wheelhouse") + 1]
    return found


def test_head_node_sh_reads_the_binaries_beside_the_wheels() -> None:
    """The convention handed_to_nodes relies on: observability.sh gets the wheelhouse's observability/ folder."""
    script = (REPO / "cluster" / "bootstrap" / "head_node.sh").read_text()
    assert '--binaries "${wheelhouse%/}/observability"' in script


def test_upload_builds_then_syncs_to_what_the_head_node_reads(tmp_path: Path) -> None:
    build = built(tmp_path / "build")
    result, calls = upload(tmp_path, DEFAULT_SPEC_PATH, "--build-dir", str(build), "--profile", "compute")
    assert result.returncode == 0, result.stderr
    makes = [call for call in calls if call[0] == "make"]
    assert makes == [
        ["make", "-C", str(REPO), "wheelhouse", "WHEELHOUSE_PYTHON=3.11", f"WHEELHOUSE_DIR={build}/wheelhouse"],
        ["make", "-C", str(REPO), "observability-binaries", f"OBSERVABILITY_DIR={build}/wheelhouse/observability"],
        ["make", "-C", str(REPO), "nccl-tests-source", f"NCCL_TESTS_SOURCE_DIR={build}/nccl-tests"],
    ]
    assert calls.index(makes[-1]) < min(i for i, c in enumerate(calls) if c[0] == "aws")  # built, then uploaded
    nodes = handed_to_nodes(load_spec())
    uploads = synced(calls)
    assert (
        set(uploads) - {NCCL_TESTS}  # the head node's user copies it (docs/fabric-checks.md), not the bootstrap
        == set(nodes.values())
        == {
            "s3://llm-demo-artifacts-111111111111/wheelhouse/py3.11/",
            "s3://llm-demo-artifacts-111111111111/wheelhouse/py3.11/observability/",
        }
    )
    assert uploads[NCCL_TESTS][3] == f"{build}/nccl-tests"
    wheels = uploads[nodes["wheelhouse"]]
    assert wheels[3] == f"{build}/wheelhouse"
    assert wheels[wheels.index("--exclude") + 1] == "observability/*"  # the binaries go to their own folder
    assert uploads[nodes["observability"]][3] == f"{build}/wheelhouse/observability"
    for call in uploads.values():
        assert call[call.index("--profile") + 1] == "compute"
        assert call[call.index("--region") + 1] == "us-east-1"
        assert "--delete" not in call  # a re-upload never removes what running nodes may still read


def test_trainium_nodes_get_the_nxdt_wheelhouse_that_was_uploaded(tmp_path: Path) -> None:
    build = built(tmp_path / "build", nxdt=True)
    result, calls = upload(tmp_path, TRN1, "--build-dir", str(build), "--no-build")
    assert result.returncode == 0, result.stderr
    assert [call for call in calls if call[0] == "make"] == []  # --no-build: the builds are already there
    nodes = handed_to_nodes(load_spec(TRN1))
    uploads = synced(calls)
    assert set(uploads) == set(nodes.values())
    assert nodes["nxdt"] == "s3://llm-demo-artifacts-111111111111/nxdt/2.26.1/"
    assert uploads[nodes["nxdt"]][3] == f"{build}/nxdt-wheelhouse"
    assert all("--profile" not in call for call in uploads.values())  # the environment's credentials


def test_the_nxdt_build_gets_the_spec(tmp_path: Path) -> None:
    build = built(tmp_path / "build", nxdt=True)
    result, calls = upload(tmp_path, TRN1, "--build-dir", str(build))
    assert result.returncode == 0, result.stderr
    assert [
        "make",
        "-C",
        str(REPO),
        "nxdt-wheelhouse",
        f"SPEC={TRN1}",
        f"NXDT_WHEELHOUSE_DIR={build}/nxdt-wheelhouse",
    ] in (calls)


def test_a_wheelhouse_in_another_bucket_is_uploaded_there(tmp_path: Path) -> None:
    data = spec_dict()
    data["cluster"]["python_wheelhouse"] = "s3://team-wheels-111111111111/py311/"
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(json.dumps(data))
    result, calls = upload(tmp_path, spec_path, "--build-dir", str(built(tmp_path / "build")), "--no-build")
    assert result.returncode == 0, result.stderr
    assert (
        set(synced(calls)) - {NCCL_TESTS}
        == set(handed_to_nodes(parse_spec(data)).values())
        == {
            "s3://team-wheels-111111111111/py311/",
            "s3://team-wheels-111111111111/py311/observability/",
        }
    )


def test_a_missing_build_is_one_error_line_and_nothing_is_uploaded(tmp_path: Path) -> None:
    result, calls = upload(tmp_path, DEFAULT_SPEC_PATH, "--build-dir", str(tmp_path / "empty"), "--no-build")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"error: wheelhouse: {tmp_path}/empty/wheelhouse holds no wheels (make wheelhouse WHEELHOUSE_PYTHON=3.11, "
        "or drop --no-build)"
    ]
    assert calls == []


def test_with_internet_and_no_wheelhouse_only_the_nccl_tests_source_is_uploaded(tmp_path: Path) -> None:
    data = spec_dict()
    data["network"]["internet_egress"] = "nat"
    assert [upload.what for upload in upload_plan(parse_spec(data), tmp_path)] == ["nccl-tests source"]
    data["cluster"]["queues"] = [{"name": "cpu", "instance_type": "c5.xlarge", "max_count": 2}]
    assert upload_plan(parse_spec(data), tmp_path) == []
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(json.dumps(data))
    result, calls = upload(tmp_path, spec_path, "--build-dir", str(tmp_path / "build"))
    assert result.returncode == 0, result.stderr
    assert calls == []
    assert "nothing to upload" in result.stderr


@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        (["PROFILE=compute"], "my-deployment.yaml --build-dir build --profile compute"),
        (["PROFILE="], "my-deployment.yaml --build-dir build"),
        (["NO_BUILD=1", "ARTIFACTS_DIR=/tmp/stand-ins"], "my-deployment.yaml --build-dir /tmp/stand-ins --no-build"),
    ],
)
def test_make_upload_artifacts_passes_the_spec_the_build_dir_and_the_profile(
    variables: list[str], expected: str
) -> None:
    result = subprocess.run(
        ["make", "-n", "--no-print-directory", "upload-artifacts", "SPEC=my-deployment.yaml", *variables],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    (line,) = [line for line in result.stdout.splitlines() if "cluster.artifacts" in line]
    assert line.endswith(f"-m cluster.artifacts {expected}"), line


# ---- the pinned nccl-tests source (Makefile: nccl-tests-source) ---------------------------------------------------

NCCL_TESTS_URL = "https://github.com/NVIDIA/nccl-tests/archive/refs/tags/v2.17.6.tar.gz"
# GitHub's archive of the tag: Spack's nccl-tests package records it, and `git archive --prefix=nccl-tests-2.17.6/
# v2.17.6 | gzip -n` of NVIDIA/nccl-tests reproduces it.
NCCL_TESTS_SHA256 = "38974e70342150ede0e3fb8fd24bfe60ccbde90fa20241716ba8bb338e6b61a0"


def make(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", *argv], cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )


def test_make_upload_artifacts_downloads_the_pinned_nccl_tests_and_checks_its_sha256(tmp_path: Path) -> None:
    """The dry run of the chain: make upload-artifacts runs cluster.artifacts, which runs make nccl-tests-source for a
    spec with GPU queues; that target fetches the pinned tag and refuses it unless its sha256 is the pin."""
    (upload_line,) = [
        line for line in make("-n", "upload-artifacts").stdout.splitlines() if "cluster.artifacts" in line
    ]
    planned = subprocess.run(
        [sys.executable, "-m", "cluster.artifacts", "--build-dir", str(tmp_path), "--dry-run"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stderr.splitlines()
    assert upload_line.split()[-3:] == ["spec/default.yaml", "--build-dir", "build"]
    assert f"+ make -C {REPO} nccl-tests-source NCCL_TESTS_SOURCE_DIR={tmp_path}/nccl-tests" in planned
    dry = make("-n", "nccl-tests-source", f"NCCL_TESTS_SOURCE_DIR={tmp_path}/nccl-tests")
    assert dry.returncode == 0, dry.stderr
    assert NCCL_TESTS_URL in dry.stdout
    assert f"{NCCL_TESTS_SHA256}  {tmp_path}/nccl-tests/nccl-tests-2.17.6.tar.gz.part" in dry.stdout
    assert "sha256sum --check" in dry.stdout


def test_a_tarball_whose_sha256_is_not_the_pin_is_not_kept(tmp_path: Path) -> None:
    """The recipe for real, on a local file (curl reads file:// URLs): the pin decides what stays."""
    served = tmp_path / "v2.17.6.tar.gz"
    served.write_bytes(b"not the release")
    out = tmp_path / "nccl-tests"
    refused = make("nccl-tests-source", f"NCCL_TESTS_URL=file://{served}", f"NCCL_TESTS_SOURCE_DIR={out}")
    assert refused.returncode != 0
    assert "FAILED" in refused.stdout + refused.stderr
    assert list(out.iterdir()) == []  # nothing for upload-artifacts to take
    digest = hashlib.sha256(served.read_bytes()).hexdigest()
    kept = make(
        "nccl-tests-source",
        f"NCCL_TESTS_URL=file://{served}",
        f"NCCL_TESTS_SHA256={digest}",
        f"NCCL_TESTS_SOURCE_DIR={out}",
    )
    assert kept.returncode == 0, kept.stderr
    assert (out / "nccl-tests-2.17.6.tar.gz").read_bytes() == b"not the release"
